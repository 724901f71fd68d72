/**
 * "Show trace page…": the server renders the trace page of an assembly (`contextAssembly/tracePage`,
 * the same self-contained HTML page as `context-assembly assemble --html`), the extension shows it
 * in a web view with scripts disabled. No `vscode` import: tested under plain Node.
 */

export const TRACE_PAGE_METHOD = "contextAssembly/tracePage";

/** The params for a task text typed by the user (no scope variables: the editor has none). */
export function tracePageParams(text: string): { request: { scope_variables: Record<string, never>; input: { text: string } } } {
  return { request: { scope_variables: {}, input: { text } } };
}

/** The page of the server's answer, or undefined when the answer is not a trace page. */
export function tracePageHtml(answer: unknown): string | undefined {
  if (typeof answer !== "object" || answer === null) return undefined;
  const html = (answer as { html?: unknown }).html;
  if (typeof html !== "string" || !html.trimStart().toLowerCase().startsWith("<!doctype html>")) return undefined;
  // the page must not load or run anything: it says so in its own Content-Security-Policy
  if (!html.includes("default-src 'none'") || /<script\b/i.test(html)) return undefined;
  return html;
}

/** The web view's title: the assembly id, shortened, or the task text. */
export function tracePageTitle(answer: unknown, text: string): string {
  const id = typeof answer === "object" && answer !== null ? (answer as { assembly_id?: unknown }).assembly_id : undefined;
  const label = typeof id === "string" && id !== "" ? id.slice(0, 12) : text.length > 40 ? `${text.slice(0, 39)}…` : text;
  return `Trace: ${label}`;
}
