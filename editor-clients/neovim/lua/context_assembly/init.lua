-- Context Assembly Server for Neovim: diagnostics, completion and hover for `.codebolt/` definition
-- files, plus the custom request `contextAssembly/evaluateRules`.
--
-- Neovim 0.11+: `vim.lsp.config('context_assembly', {...})` + `vim.lsp.enable('context_assembly')`.
-- Neovim 0.7 to 0.10: `vim.lsp.start_client` (one client per workspace root), attached to buffers by
-- an autocmd on BufReadPost/BufNewFile.
--
-- Either way the client attaches only to buffers of `filetypes` whose path lies under a
-- `root_markers` directory (`.codebolt/`); the workspace root is the directory containing it.

local M = {}

M.name = 'context_assembly'

local api = vim.api
local has_011 = vim.fn.has('nvim-0.11') == 1

local defaults = {
  cmd = { 'context-assembly', 'serve' },
  settings = {}, -- workspace/configuration section `contextAssembly` and initializationOptions.settings
  filetypes = { 'json', 'yaml' },
  root_markers = { '.codebolt' },
  on_attach = nil, -- function(client, bufnr)
  capabilities = nil, -- client capabilities (default: Neovim's own)
  commands = true, -- define :ContextAssemblyEvaluate
}

M.config = nil
local clients_by_root = {} -- Neovim < 0.11: root -> client id

local function notify(message, level)
  vim.notify('[context-assembly] ' .. message, level or vim.log.levels.INFO)
end

-- An empty Lua table would be sent as `[]`: settings must reach the server as an object.
local function as_object(value)
  if type(value) ~= 'table' or next(value) == nil then
    return vim.empty_dict()
  end
  return value
end

--- The workspace root of `path`: the directory containing its innermost `root_markers` directory
--- (`/ws/.codebolt/ContextRuleEngine/a.json` -> `/ws`), or nil when the file is not under one.
function M.root_dir(path, markers)
  markers = markers or (M.config and M.config.root_markers) or defaults.root_markers
  if type(path) ~= 'string' or path == '' then
    return nil
  end
  path = vim.fn.fnamemodify(path, ':p'):gsub('\\', '/')
  local parts = vim.split(path, '/', { plain = true })
  for index = #parts - 1, 1, -1 do -- the last part is the file name itself
    if vim.tbl_contains(markers, parts[index]) then
      local root = table.concat(parts, '/', 1, index - 1)
      if root == '' then
        root = '/'
      end
      return root
    end
  end
  return nil
end

local function buffer_root(bufnr)
  if not api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= '' then
    return nil
  end
  if not vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  return M.root_dir(api.nvim_buf_get_name(bufnr))
end

local function client_settings()
  local settings = as_object(M.config.settings)
  return { contextAssembly = settings }, { settings = settings }
end

--- The running context_assembly clients (attached to `bufnr` when given).
function M.get_clients(bufnr)
  if vim.lsp.get_clients then -- 0.10+
    return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
  end
  local found = {}
  local candidates = bufnr and vim.tbl_values(vim.lsp.buf_get_clients(bufnr)) or vim.lsp.get_active_clients()
  for _, client in ipairs(candidates) do
    if client.name == M.name then
      table.insert(found, client)
    end
  end
  return found
end

-- Neovim 0.7 to 0.10 ------------------------------------------------------------------------------

local function start_client(root)
  -- Not `client_is_stopped`: on 0.7 it answers true while a client is still initialising, which
  -- started a second server for the same root. The entry is cleared by on_exit instead.
  local id = clients_by_root[root]
  if id then
    return id
  end
  local settings, init_options = client_settings()
  id = vim.lsp.start_client({
    name = M.name,
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    settings = settings,
    init_options = init_options,
    capabilities = M.config.capabilities,
    on_attach = M.config.on_attach,
    on_exit = function(_, _, client_id)
      if clients_by_root[root] == client_id then
        clients_by_root[root] = nil
      end
    end,
  })
  clients_by_root[root] = id
  return id
end

local function attach(bufnr)
  if not api.nvim_buf_is_valid(bufnr) or not api.nvim_buf_is_loaded(bufnr) then
    return
  end
  local root = buffer_root(bufnr)
  if root == nil then
    return
  end
  local id = start_client(root)
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  else
    notify('could not start ' .. table.concat(M.config.cmd, ' '), vim.log.levels.ERROR)
  end
end

local function setup_legacy()
  local group = api.nvim_create_augroup('context_assembly', { clear = true })
  api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
    group = group,
    callback = function(args)
      -- filetype detection runs in the same event: decide once it has set 'filetype'
      vim.schedule(function()
        attach(args.buf)
      end)
    end,
  })
  api.nvim_create_autocmd('FileType', { -- a filetype set by hand (`:set ft=json`)
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      vim.schedule(function()
        attach(args.buf)
      end)
    end,
  })
  for _, bufnr in ipairs(api.nvim_list_bufs()) do -- buffers opened before setup()
    attach(bufnr)
  end
end

-- Neovim 0.11+ --------------------------------------------------------------------------------------

local function setup_011()
  local settings, init_options = client_settings()
  vim.lsp.config(M.name, {
    cmd = M.config.cmd,
    filetypes = M.config.filetypes,
    root_markers = M.config.root_markers,
    -- only files under `.codebolt/` (root_markers alone would attach to every JSON/YAML file below the root)
    root_dir = function(bufnr, on_dir)
      local root = buffer_root(bufnr)
      if root then
        on_dir(root)
      end
    end,
    settings = settings,
    init_options = init_options,
    capabilities = M.config.capabilities,
    on_attach = M.config.on_attach,
  })
  vim.lsp.enable(M.name)
end

-- Custom requests -----------------------------------------------------------------------------------

local function send(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

--- Sends `method` with `params` (a Lua table, e.g. from `vim.json.decode`) to a context_assembly
--- client: the one attached to `opts.bufnr` (default: the current buffer), else any running one.
--- `callback(err, result)` is called with the JSON-RPC error or the result.
function M.request(method, params, callback, opts)
  opts = opts or {}
  local bufnr = opts.bufnr or api.nvim_get_current_buf()
  local client = M.get_clients(bufnr)[1] or M.get_clients()[1]
  if client == nil then
    callback({ code = -32603, message = 'no context_assembly client is running: open a file under .codebolt/ first' })
    return false
  end
  local ok = send(client, method, params, function(err, result)
    callback(err, result)
  end, bufnr)
  if not ok then
    callback({ code = -32603, message = 'the context_assembly client is not running' })
  end
  return ok
end

--- `contextAssembly/evaluateRules`: `request` is an assembly request (scope_variables,
--- additional_variables, input, ...); `callback(err, result)` gets `{matched_memories,
--- excluded_memories, engine_results, variables_used, missing_variables}`.
function M.evaluate_rules(request, callback, opts)
  return M.request('contextAssembly/evaluateRules', request, callback, opts)
end

-- a readable JSON rendering (0.7 has no pretty printer); keys sorted
local function pretty(value, indent)
  indent = indent or ''
  local inner = indent .. '  '
  if type(value) ~= 'table' then
    return vim.json.encode(value)
  end
  if next(value) == nil then
    return getmetatable(value) == getmetatable(vim.empty_dict()) and '{}' or '[]'
  end
  local lines = {}
  if (vim.islist or vim.tbl_islist)(value) then
    for _, item in ipairs(value) do
      table.insert(lines, inner .. pretty(item, inner))
    end
    return '[\n' .. table.concat(lines, ',\n') .. '\n' .. indent .. ']'
  end
  local keys = vim.tbl_keys(value)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, key in ipairs(keys) do
    table.insert(lines, inner .. vim.json.encode(tostring(key)) .. ': ' .. pretty(value[key], inner))
  end
  return '{\n' .. table.concat(lines, ',\n') .. '\n' .. indent .. '}'
end
M.pretty = pretty

local function show(title, result)
  local lines = { '// ' .. title }
  if type(result) == 'table' and result.matched_memories then
    table.insert(lines, '// matched: ' .. table.concat(result.matched_memories, ', '))
    table.insert(lines, '// excluded: ' .. table.concat(result.excluded_memories or {}, ', '))
  end
  vim.list_extend(lines, vim.split(pretty(result), '\n', { plain = true }))
  vim.cmd('botright new')
  local bufnr = api.nvim_get_current_buf()
  vim.bo[bufnr].buftype = 'nofile'
  vim.bo[bufnr].bufhidden = 'wipe'
  vim.bo[bufnr].swapfile = false
  api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].filetype = 'jsonc'
  vim.bo[bufnr].modifiable = false
end

--- :ContextAssemblyEvaluate [request.json]: evaluates the rules against the request file (default:
--- the current buffer) and shows the result in a scratch window.
local function evaluate_command(args)
  local text
  if args.args ~= '' then
    local path = vim.fn.expand(args.args)
    if vim.fn.filereadable(path) ~= 1 then
      notify('cannot read ' .. path, vim.log.levels.ERROR)
      return
    end
    text = table.concat(vim.fn.readfile(path), '\n')
  else
    text = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  end
  local ok, request = pcall(vim.json.decode, text)
  if not ok or type(request) ~= 'table' then
    notify('the request is not a JSON object: ' .. tostring(request), vim.log.levels.ERROR)
    return
  end
  M.evaluate_rules(request, function(err, result)
    vim.schedule(function()
      if err then
        local data = type(err.data) == 'table' and err.data or {}
        local details = data.errors and (' ' .. vim.json.encode(data.errors)) or ''
        notify('evaluateRules failed: ' .. tostring(err.message) .. details, vim.log.levels.ERROR)
        return
      end
      show('contextAssembly/evaluateRules ' .. (args.args ~= '' and args.args or '(current buffer)'), result)
    end)
  end)
end

--- setup(opts): see the defaults above. Calling it again replaces the configuration.
function M.setup(opts)
  M.config = vim.tbl_extend('force', vim.deepcopy(defaults), opts or {})
  if M.config.commands then
    api.nvim_create_user_command('ContextAssemblyEvaluate', evaluate_command, {
      nargs = '?',
      complete = 'file',
      desc = 'Evaluate the context rules against an assembly request (JSON file, default: this buffer)',
    })
  end
  if has_011 then
    setup_011()
  else
    setup_legacy()
  end
  return M
end

return M
