import * as assert from "node:assert/strict";
import { describe as suite, test } from "node:test";

import { TRACE_PAGE_METHOD, tracePageHtml, tracePageParams, tracePageTitle } from "../src/tracePage";

const PAGE = `<!DOCTYPE html>\n<html lang=en><head><meta http-equiv=Content-Security-Policy content="default-src 'none'; style-src 'unsafe-inline'"></head><body><section id="section-state"></section></body></html>`;

suite("trace page", () => {
  test("asks the server for the page of a typed task", () => {
    assert.equal(TRACE_PAGE_METHOD, "contextAssembly/tracePage");
    assert.deepEqual(tracePageParams("fix the login"), { request: { scope_variables: {}, input: { text: "fix the login" } } });
  });

  test("shows the server's page as it is", () => {
    assert.equal(tracePageHtml({ assembly_id: "a", html: PAGE }), PAGE);
  });

  test("refuses anything that is not a locked-down page", () => {
    for (const answer of [null, "x", 3, {}, { html: 5 }, { html: "<p>not a document</p>" },
      { html: PAGE.replace("default-src 'none'", "default-src *") },
      { html: PAGE.replace("</body>", "<script>alert(1)</script></body>") }]) {
      assert.equal(tracePageHtml(answer), undefined, JSON.stringify(answer));
    }
  });

  test("titles", () => {
    assert.equal(tracePageTitle({ assembly_id: "0123456789abcdef" }, "x"), "Trace: 0123456789ab");
    assert.equal(tracePageTitle({}, "short task"), "Trace: short task");
    assert.equal(tracePageTitle(null, "a".repeat(50)), `Trace: ${"a".repeat(39)}…`);
  });
});
