import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe as suite, test } from "node:test";

import { barFractions, barWidth, escapeHtml, percent, renderAssembly, renderBarChart, renderError, SECTIONS } from "../src/render";

const PACKAGE = path.resolve(__dirname, "..", "..");
const FIXTURE = JSON.parse(readFileSync(path.join(PACKAGE, "test", "fixtures", "assembled.json"), "utf8"));
const HOSTILE = `</pre><script>alert(1)</script><img src=x onerror="alert('x')"> & \` "quoted" 'single'`;

function item(section: string, tokens: unknown, extra: Record<string, unknown> = {}) {
  return { id: `i-${section}-${String(tokens)}`, content: `content of ${section}`, memory_id: null, source: `kv://${section}`,
    section, priority: "medium", score: null, tokens, metadata: {}, ...extra };
}

/** Every <rect class="bar"> width in a chart, in order. */
function barWidths(svg: string): number[] {
  return [...svg.matchAll(/<rect class="bar" [^>]*width="([\d.]+)"/g)].map((m) => Number(m[1]));
}

suite("token bar math", () => {
  test("shares of the sum by default, of an explicit scale when given", () => {
    assert.deepEqual(barFractions([1, 3]), [0.25, 0.75]);
    assert.deepEqual(barFractions([50, 25], 200), [0.25, 0.125]);
  });

  test("no NaN, no negative, no bar longer than the track", () => {
    assert.deepEqual(barFractions([0, 0]), [0, 0]);
    assert.deepEqual(barFractions([]), []);
    assert.deepEqual(barFractions([-5, Number.NaN, "7", null, 10]), [0, 0, 0, 0, 1]);
    assert.deepEqual(barFractions([30, 10], 20), [1, 0.5]); // over the scale: clamped
    assert.deepEqual(barFractions([5, 5], 0), [0.5, 0.5]); // a zero scale falls back to the sum
  });

  test("bar widths: rounded to 0.1 px, at least 1 px when non-zero, 0 for zero", () => {
    assert.equal(barWidth(0.5, 240), 120);
    assert.equal(barWidth(1 / 3, 240), 80);
    assert.equal(barWidth(0.123456, 100), 12.3);
    assert.equal(barWidth(0.0001, 240), 1);
    assert.equal(barWidth(0, 240), 0);
    assert.equal(barWidth(Number.NaN, 240), 0);
    assert.equal(barWidth(2, 240), 240);
    assert.equal(percent(0.7758), "77.6%");
  });

  test("a chart has one bar per row, proportional to the tokens", () => {
    const svg = renderBarChart([{ label: "a", tokens: 30 }, { label: "b", tokens: 10 }, { label: "c", tokens: 0 }], "t");
    assert.deepEqual(barWidths(svg), [180, 60, 0]);
    assert.equal(renderBarChart([], "t"), "");
  });
});

suite("escaping", () => {
  test("escapeHtml covers element content and both quote styles", () => {
    assert.equal(escapeHtml(`<a href="x" title='y'>&\`</a>`), "&#60;a href=&#34;x&#34; title=&#39;y&#39;&#62;&#38;&#96;&#60;/a&#62;");
    assert.equal(escapeHtml(undefined), "");
    assert.equal(escapeHtml(null), "");
    assert.equal(escapeHtml(42), "42");
  });

  test("server text never becomes markup, wherever it appears", () => {
    const hostile = {
      context: {
        state: [item("state", 3, { content: HOSTILE, source: HOSTILE, memory_id: HOSTILE, metadata: { title: HOSTILE }, priority: HOSTILE })],
        [HOSTILE]: [item(HOSTILE, 2)],
      },
      trace: { sections: {}, missing_variables: [HOSTILE] },
      meta: { assembly_id: HOSTILE, token_estimate: 5, total_items: 2, truncated: true, duration_ms: 1 },
    };
    const html = renderAssembly(hostile, { nonce: `n"><script>`, task: HOSTILE });
    assert.ok(!html.includes("<script"), "no script element");
    assert.ok(!html.includes("<img"), "no img element");
    assert.ok(!html.includes(`onerror="`), "no live event handler attribute");
    assert.ok(!html.includes(`"alert('x')"`));
    assert.ok(html.includes("&#60;script&#62;alert(1)&#60;/script&#62;"));
    const error = renderError(HOSTILE, [HOSTILE], { nonce: "abc" });
    assert.ok(!error.includes("<script") && !error.includes("<img"));
  });
});

suite("the assembled-context page", () => {
  const html = renderAssembly(FIXTURE, { nonce: "NONCE123", task: "fix the login timeout" });

  test("locked down: CSP default-src 'none', a nonce'd style, no script, nothing loaded from anywhere", () => {
    assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-NONCE123';">/);
    assert.match(html, /<style nonce="NONCE123">/);
    assert.ok(!/<script/i.test(html));
    const urls = [...html.matchAll(/https?:\/\/[^\s"'<>)]+/g)].map((m) => m[0]);
    assert.deepEqual(urls.filter((u) => u !== "http://www.w3.org/2000/svg"), []);
    assert.ok(!/\s(?:src|href)=/.test(html));
    assert.ok(!/url\(|@import/.test(html));
    assert.ok(!/\sstyle=/.test(html), "no inline style attributes (the CSP would block them)");
  });

  test("every section in the fixed order, each with its items", () => {
    const positions = SECTIONS.map((name) => html.indexOf(`<section id="section-${name}">`));
    assert.ok(positions.every((p) => p >= 0), JSON.stringify(positions));
    assert.deepEqual([...positions].sort((a, b) => a - b), positions);
    for (const name of SECTIONS) {
      for (const entry of FIXTURE.context[name]) assert.ok(html.includes(escapeHtml(entry.content)), `${name}: ${entry.id}`);
    }
    assert.equal((html.match(/<details class="item">/g) ?? []).length, FIXTURE.meta.total_items);
    assert.ok(html.includes(`assembly ${FIXTURE.meta.assembly_id}`));
  });

  test("an overview chart of tokens per section (share of the token estimate) and one chart per non-empty section", () => {
    const charts = [...html.matchAll(/<svg class="chart"[\s\S]*?<\/svg>/g)].map((m) => m[0]);
    const nonEmpty = SECTIONS.filter((name) => FIXTURE.context[name].length > 0);
    assert.equal(charts.length, 1 + nonEmpty.length);
    const expected = SECTIONS.map((name) => barWidth(FIXTURE.trace.sections[name].tokens / FIXTURE.meta.token_estimate));
    assert.deepEqual(barWidths(charts[0]!), expected);
    // knowledge: two items of 45 tokens each → two half bars
    const knowledge = charts[1 + nonEmpty.indexOf("knowledge")]!;
    assert.deepEqual(barWidths(knowledge), [120, 120]);
    assert.match(knowledge, /45 \(50%\)/);
  });

  test("tolerates a partial or odd result", () => {
    const page = renderAssembly({ context: { knowledge: [item("knowledge", 10), "junk", null] } }, { nonce: "n" });
    assert.ok(page.includes("knowledge"));
    assert.equal((page.match(/<section /g) ?? []).length, SECTIONS.length);
    for (const odd of [null, 7, "text", [], {}]) assert.match(renderAssembly(odd, { nonce: "n" }), /<\/html>/);
  });
});
