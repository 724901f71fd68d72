"""The Neovim client (`editor-clients/neovim`) against the real server: a headless Neovim
(`nvim --headless --clean -u <generated init.lua>`) loads the Lua module, starts the sidecar as
`<this python> -m context_assembly serve`, opens a rule file with a deliberate mistake in a copy of
the quickstart workspace, and writes what it saw (diagnostics, completion, hover, evaluateRules) as
JSON for the assertions below.

Neovim is required, not optional: CI installs it (`apt-get install neovim`), so a missing editor
fails this test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from context_assembly.formatting import format_text
from context_assembly.registry.operators import lookup_operator

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "editor-clients" / "neovim"
TIMEOUT_MS = 60_000  # each wait inside Neovim
PROCESS_TIMEOUT_S = 240  # the whole editor run (several waits)

RULE_FILE = """\
{
  "$schema": "urn:context-assembly:schema:rule-engine",
  "id": "broken",
  "name": "A rule with a mistake",
  "enabled": true,
  "rules": [
    {
      "id": "agent-check",
      "priority": 1,
      "when": [
        { "field": "scope.agent.agent_name", "operator": "equal", "value": "code-agent" },
        { "field": "addVar.phase", "operator": "eq", "value": "planning" }
      ],
      "then": { "add_memories": ["architecture-docs"] }
    }
  ]
}
"""

# Runs once Neovim has started; every step's outcome goes into `out`, written even when a step fails.
TEST_LUA = r"""
local config = vim.json.decode(table.concat(vim.fn.readfile(os.getenv('CONTEXT_ASSEMBLY_NVIM_TEST')), '\n'))
vim.opt.runtimepath:prepend(config.plugin)
local out = { version = vim.version() }

local function write_out()
  local file = assert(io.open(config.result, 'w'))
  file:write(vim.json.encode(out))
  file:close()
end

local function run()
  local ca = require('context_assembly')
  ca.setup({ cmd = config.cmd, settings = { max_tokens = 3000 } })
  vim.cmd('edit ' .. vim.fn.fnameescape(config.rule_file))
  local bufnr = vim.api.nvim_get_current_buf()
  out.filetype = vim.bo[bufnr].filetype

  out.attached = vim.wait(config.timeout_ms, function() return #ca.get_clients(bufnr) > 0 end, 50)
  if not out.attached then error('the client never attached') end
  local client = ca.get_clients(bufnr)[1]
  out.root = client.config.root_dir

  out.diagnostics_arrived = vim.wait(config.timeout_ms, function()
    return #vim.diagnostic.get(bufnr) > 0
  end, 50)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
                                    message = d.message, severity = d.severity, code = d.code })
  end

  local uri = vim.uri_from_bufnr(bufnr)
  local function ask(method, position)
    local responses, err = vim.lsp.buf_request_sync(bufnr, method,
      { textDocument = { uri = uri }, position = position }, config.timeout_ms)
    if responses == nil then error(method .. ': ' .. tostring(err)) end
    for _, response in pairs(responses) do
      if response.err then error(method .. ': ' .. vim.inspect(response.err)) end
      return response.result
    end
  end

  local completion = ask('textDocument/completion', config.completion_at)
  local items = completion and (completion.items or completion) or {}
  out.completion = {}
  for _, item in ipairs(items) do
    local edit = item.textEdit and item.textEdit.newText
    table.insert(out.completion, { label = item.label, insert = item.insertText or edit })
  end

  local hover = ask('textDocument/hover', config.hover_at)
  local contents = hover and hover.contents
  if type(contents) == 'table' then contents = contents.value or vim.inspect(contents) end
  out.hover = contents

  local done = false
  ca.evaluate_rules(vim.json.decode(table.concat(vim.fn.readfile(config.request), '\n')), function(err, result)
    out.evaluate = { err = err, result = result }
    done = true
  end, { bufnr = bufnr })
  out.evaluate_answered = vim.wait(config.timeout_ms, function() return done end, 50)

  -- the user command: the result lands in a scratch window
  local before = vim.api.nvim_get_current_buf()
  vim.cmd('ContextAssemblyEvaluate ' .. vim.fn.fnameescape(config.request))
  vim.wait(config.timeout_ms, function() return vim.api.nvim_get_current_buf() ~= before end, 50)
  out.command_output = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  vim.cmd('close')

  -- inlay hints and semantic tokens as Neovim's client asks for them (0.7 renders neither itself)
  local last = vim.api.nvim_buf_line_count(bufnr)
  local function ask_document(method, extra)
    local params = vim.tbl_extend('force', { textDocument = { uri = uri } }, extra or {})
    local responses, err = vim.lsp.buf_request_sync(bufnr, method, params, config.timeout_ms)
    if responses == nil then error(method .. ': ' .. tostring(err)) end
    for _, response in pairs(responses) do
      if response.err then error(method .. ': ' .. vim.inspect(response.err)) end
      return response.result
    end
  end
  out.inlay_hints = ask_document('textDocument/inlayHint',
    { range = { start = { line = 0, character = 0 }, ['end'] = { line = last, character = 0 } } })
  out.semantic_tokens = ask_document('textDocument/semanticTokens/full')
  local provider = client.server_capabilities and client.server_capabilities.semanticTokensProvider
  out.legend = provider and provider.legend

  -- Neovim's own formatting command on the rule buffer (0.8+: format, 0.7: formatting_sync)
  vim.api.nvim_set_current_buf(bufnr)
  if vim.lsp.buf.format then
    vim.lsp.buf.format({ bufnr = bufnr, timeout_ms = config.timeout_ms })
  else
    vim.lsp.buf.formatting_sync(nil, config.timeout_ms)
  end
  out.formatted = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') .. '\n'

  -- a JSON file outside .codebolt/: the module does not attach; a client that sends every JSON file
  -- (as Helix does) is answered with nothing: no diagnostics, no completion, no hover
  vim.cmd('edit ' .. vim.fn.fnameescape(config.other_file))
  local other = vim.api.nvim_get_current_buf()
  vim.wait(500, function() return false end, 50)
  out.other_attached = #ca.get_clients(other) > 0
  vim.lsp.buf_attach_client(other, client.id)
  local other_uri = vim.uri_from_bufnr(other)
  local position = { line = 1, character = 4 }
  local completion_other = vim.lsp.buf_request_sync(other, 'textDocument/completion',
    { textDocument = { uri = other_uri }, position = position }, config.timeout_ms)
  local hover_other = vim.lsp.buf_request_sync(other, 'textDocument/hover',
    { textDocument = { uri = other_uri }, position = position }, config.timeout_ms)
  vim.wait(1500, function() return #vim.diagnostic.get(other) > 0 end, 50)
  out.other = { diagnostics = #vim.diagnostic.get(other), completion = {}, hover = {} }
  for _, response in pairs(completion_other or {}) do table.insert(out.other.completion, response.result or vim.NIL) end
  for _, response in pairs(hover_other or {}) do table.insert(out.other.hover, response.result or vim.NIL) end
end

vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function()
  vim.schedule(function()
    local ok, err = xpcall(run, debug.traceback)
    out.ok = ok
    out.error = (not ok) and tostring(err) or nil
    write_out()
    vim.cmd('qa!')
  end)
end })
"""


def _nvim() -> str:
    found = shutil.which("nvim")
    assert found is not None, ("`nvim` is not on PATH: the Neovim client's test needs Neovim 0.7+ "
                               "(Debian/Ubuntu: `apt-get install neovim`)")
    return found


def _position(text: str, needle: str, after: str) -> dict[str, int]:
    """The LSP position just after `after` inside the first line containing `needle` (ASCII text)."""
    for line_no, line in enumerate(text.splitlines()):
        if needle in line:
            return {"line": line_no, "character": line.index(after) + len(after)}
    raise AssertionError(f"{needle!r} is not in the rule file")


def _end_group(pgid: int, grace_s: float = 10.0) -> None:
    """Give the group (the server Neovim started) `grace_s` to exit on its own, then kill it."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _run_editor(nvim: str, workspace: Path, tmp_path: Path, config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    config_file = tmp_path / "nvim-test.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    init = tmp_path / "init.lua"
    init.write_text(TEST_LUA, encoding="utf-8")
    home = tmp_path / "nvim-home"
    env = {**os.environ, "CONTEXT_ASSEMBLY_NVIM_TEST": str(config_file),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "server"), os.environ.get("PYTHONPATH")])),
           **{f"XDG_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")}}
    process = subprocess.Popen([nvim, "--headless", "--clean", "-u", str(init)], cwd=workspace, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)  # its own process group: the server goes with it
    try:
        output, _ = process.communicate(timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(f"Neovim did not finish within {PROCESS_TIMEOUT_S} s\n"
                             f"{output.decode(errors='replace')[-20000:]}") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        _end_group(process.pid)  # the editor is gone; no server it started may outlive it
    text = output.decode(errors="replace")
    result = Path(config["result"])
    assert result.is_file(), f"Neovim (exit status {process.returncode}) wrote no results\n{text[-20000:]}"
    return json.loads(result.read_text(encoding="utf-8")), text


def test_neovim_client_against_the_server(example_copy: Path, tmp_path: Path) -> None:
    nvim = _nvim()
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=60).stdout
    found = re.search(r"NVIM v(\d+)\.(\d+)", version)
    assert found is not None and (int(found[1]), int(found[2])) >= (0, 7), f"Neovim 0.7+ is needed, not {version!r}"

    rule_file = example_copy / ".codebolt" / "context-rule-engines" / "broken.json"
    rule_file.write_text(RULE_FILE, encoding="utf-8")
    other_file = example_copy / "settings.json"  # JSON, but not a definition file
    other_file.write_text('{\n  "field": "scope.agent.",\n  "operator": "equal"\n}\n', encoding="utf-8")
    config = {
        "plugin": str(PLUGIN),
        "cmd": [sys.executable, "-m", "context_assembly", "serve"],
        "rule_file": str(rule_file),
        "request": str(example_copy / "request.json"),
        "result": str(tmp_path / "nvim-result.json"),
        "other_file": str(other_file),
        "timeout_ms": TIMEOUT_MS,
        # inside the string value "scope.agent.agent_name", just after "scope.agent."
        "completion_at": _position(RULE_FILE, '"equal"', '"field": "scope.agent.'),
        # on the operator "eq"
        "hover_at": _position(RULE_FILE, '"eq"', '"operator": "e'),
    }
    out, log = _run_editor(nvim, example_copy, tmp_path, config)
    context = f"\nNeovim reported: {json.dumps(out, indent=1)[:20000]}\noutput:\n{log[-5000:]}"
    assert out.get("ok"), f"the Neovim script failed: {out.get('error')}{context}"

    assert out["filetype"] == "json", context
    assert Path(out["root"]).resolve() == example_copy.resolve(), context

    # (a) the unknown operator, on its line, with the operator named in the message
    bad_line = next(i for i, line in enumerate(RULE_FILE.splitlines()) if '"equal"' in line)
    bad_col = RULE_FILE.splitlines()[bad_line].index('"equal"')
    hits = [d for d in out["diagnostics"] if d["lnum"] == bad_line and "equal" in d["message"]
            and "operator" in d["message"]]
    assert hits, f"no diagnostic on the unknown operator 'equal' (line {bad_line}){context}"
    assert any(d["col"] <= bad_col + 1 <= d["end_col"] for d in hits), context

    # (b) completion of a variable inside "scope.agent.…"
    assert "scope.agent.agent_name" in {item["label"] for item in out["completion"]}, context

    # (c) hover on an operator: its description from the registry
    operator = lookup_operator("eq")
    assert operator is not None
    assert isinstance(out["hover"], str) and operator.description in out["hover"], context

    # (d) the custom request through the module's helper
    assert out["evaluate_answered"], context
    evaluate = out["evaluate"]
    assert evaluate.get("err") in (None, {}), context
    assert "architecture-docs" in evaluate["result"]["matched_memories"], context

    # :ContextAssemblyEvaluate shows the same result
    assert "matched: architecture-docs" in out["command_output"], context

    # (e) inlay hints: where a field is read from, a memory's section and priority
    lines = RULE_FILE.splitlines()
    hints = {(lines[h["position"]["line"]][:h["position"]["character"]].strip(), h["label"])
             for h in out["inlay_hints"]}
    assert ('{ "field": "addVar.phase"', "← additional_variables.phase") in hints, context
    assert ('"then": { "add_memories": ["architecture-docs"', "knowledge · high") in hints, context

    # (f) semantic tokens against the legend the server announced
    legend, data, decoded, line, start = out["legend"], out["semantic_tokens"]["data"], [], 0, 0
    for i in range(0, len(data), 5):
        line += data[i]
        start = start + data[i + 1] if data[i] == 0 else data[i + 1]
        decoded.append((lines[line][start:start + data[i + 2]], legend["tokenTypes"][data[i + 3]]))
    assert ("scope.agent.agent_name", "variable") in decoded and ("eq", "operator") in decoded, context
    assert ("architecture-docs", "type") in decoded and ("equal", "operator") not in decoded, context

    # (g) formatting through the editor's own command gives the formatter's layout
    assert out["formatted"] == format_text(RULE_FILE, "broken.json", "rule-engine"), context

    # other JSON files: not attached by the module; a client that sends them anyway gets nothing back
    assert out["other_attached"] is False, context
    assert out["other"] == {"diagnostics": 0, "completion": [None], "hover": [None]}, context
