/**
 * The HTML of the "Assemble context" webview (no `vscode` import): every section with its items and
 * a token bar chart, as inline SVG. Everything that comes from the server is escaped; the page loads
 * nothing (CSP `default-src 'none'`), runs no script and styles itself with one nonce'd <style>.
 */

export const SECTIONS = [
  "state",
  "warnings",
  "constraints",
  "knowledge",
  "history",
  "suggestions",
  "working_memory",
] as const;

const CHART_WIDTH = 240; // px of the longest possible bar
const ROW_HEIGHT = 18;
const LABEL_MAX = 48; // characters of an item label in a chart

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  const text = typeof value === "string" ? value : value === undefined || value === null ? "" : String(value);
  return text.replace(/[&<>"'`]/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** A non-negative finite number, else 0. */
export function tokenCount(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * Each value's share of `scale` (default: the sum of the values), clamped to [0, 1]. A zero or
 * missing scale gives all zeros (no division by zero, no NaN).
 */
export function barFractions(values: readonly unknown[], scale?: number): number[] {
  const counts = values.map(tokenCount);
  const total = scale !== undefined && tokenCount(scale) > 0 ? tokenCount(scale) : counts.reduce((a, b) => a + b, 0);
  if (total <= 0) return counts.map(() => 0);
  return counts.map((count) => Math.min(1, count / total));
}

/** Bar width in px for a fraction: rounded to 0.1 px; a non-zero value is always at least 1 px wide. */
export function barWidth(fraction: number, width = CHART_WIDTH): number {
  if (!(fraction > 0)) return 0;
  return Math.max(1, Math.round(Math.min(1, fraction) * width * 10) / 10);
}

export function percent(fraction: number): string {
  return `${Math.round(fraction * 1000) / 10}%`;
}

function truncate(text: string, max: number): string {
  const chars = Array.from(text); // never cut a surrogate pair
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join("")}…`;
}

export interface ChartRow {
  readonly label: string;
  readonly tokens: unknown;
}

/** A horizontal bar chart: one row per entry, label, bar (share of `scale`), token count. */
export function renderBarChart(rows: readonly ChartRow[], title: string, scale?: number): string {
  if (rows.length === 0) return "";
  const fractions = barFractions(rows.map((row) => row.tokens), scale);
  const labelWidth = 180;
  const height = rows.length * ROW_HEIGHT + 4;
  const totalWidth = labelWidth + CHART_WIDTH + 110;
  const body = rows
    .map((row, i) => {
      const y = i * ROW_HEIGHT + 2;
      const tokens = tokenCount(row.tokens);
      const width = barWidth(fractions[i]!);
      const label = escapeHtml(truncate(row.label, LABEL_MAX));
      return (
        `<g><title>${escapeHtml(row.label)}: ${tokens} tokens (${percent(fractions[i]!)})</title>` +
        `<text class="label" x="${labelWidth - 6}" y="${y + 13}" text-anchor="end">${label}</text>` +
        `<rect class="track" x="${labelWidth}" y="${y + 3}" width="${CHART_WIDTH}" height="${ROW_HEIGHT - 6}"></rect>` +
        `<rect class="bar" x="${labelWidth}" y="${y + 3}" width="${width}" height="${ROW_HEIGHT - 6}"></rect>` +
        `<text class="value" x="${labelWidth + CHART_WIDTH + 6}" y="${y + 13}">${tokens} (${percent(fractions[i]!)})</text></g>`
      );
    })
    .join("");
  return (
    `<svg class="chart" role="img" aria-label="${escapeHtml(title)}" width="${totalWidth}" height="${height}" ` +
    `viewBox="0 0 ${totalWidth} ${height}" xmlns="http://www.w3.org/2000/svg">${body}</svg>`
  );
}

type Json = Record<string, unknown>;

function asObject(value: unknown): Json {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function itemLabel(item: Json): string {
  const metadata = asObject(item.metadata);
  for (const candidate of [metadata.title, item.memory_id, item.source, item.id]) {
    if (typeof candidate === "string" && candidate !== "") return candidate;
  }
  return "(item)";
}

function renderItem(item: Json): string {
  const facts: string[] = [];
  if (typeof item.priority === "string") facts.push(`priority ${escapeHtml(item.priority)}`);
  if (typeof item.score === "number") facts.push(`score ${escapeHtml(Math.round(item.score * 1000) / 1000)}`);
  facts.push(`${tokenCount(item.tokens)} tokens`);
  if (typeof item.memory_id === "string") facts.push(`memory <code>${escapeHtml(item.memory_id)}</code>`);
  if (typeof item.source === "string") facts.push(`source <code>${escapeHtml(item.source)}</code>`);
  return (
    `<details class="item"><summary><span class="item-title">${escapeHtml(itemLabel(item))}</span> ` +
    `<span class="facts">${facts.join(" · ")}</span></summary>` +
    `<pre>${escapeHtml(item.content)}</pre></details>`
  );
}

export interface RenderOptions {
  /** The CSP nonce of the page's <style> element. */
  readonly nonce: string;
  /** The task text the context was assembled for (shown as the heading). */
  readonly task?: string;
}

/** The full HTML document for an `contextAssembly/assemble` result. */
export function renderAssembly(result: unknown, options: RenderOptions): string {
  const root = asObject(result);
  const context = asObject(root.context);
  const trace = asObject(root.trace);
  const traceSections = asObject(trace.sections);
  const meta = asObject(root.meta);

  const sectionNames = [...SECTIONS, ...Object.keys(context).filter((name) => !(SECTIONS as readonly string[]).includes(name))];
  const sections = sectionNames.map((name) => {
    const items = asArray(context[name]).map(asObject);
    const sectionTrace = asObject(traceSections[name]);
    const itemTokens = items.reduce((sum, item) => sum + tokenCount(item.tokens), 0);
    const tokens = sectionTrace.tokens !== undefined ? tokenCount(sectionTrace.tokens) : itemTokens;
    return { name, items, tokens, itemTokens, trace: sectionTrace };
  });
  const total = tokenCount(meta.token_estimate) || sections.reduce((sum, s) => sum + s.tokens, 0);

  const overview = renderBarChart(
    sections.map((s) => ({ label: s.name, tokens: s.tokens })),
    "tokens per section",
    total,
  );

  const sectionHtml = sections
    .map((s) => {
      const dropped = tokenCount(s.trace.dropped);
      const notes = [`${s.items.length} item${s.items.length === 1 ? "" : "s"}`, `${s.tokens} tokens`];
      if (dropped > 0) notes.push(`${dropped} dropped`);
      if (s.trace.truncated === true) notes.push("truncated");
      const chart = renderBarChart(
        s.items.map((item) => ({ label: itemLabel(item), tokens: item.tokens })),
        `tokens per item in ${s.name}`,
        s.itemTokens,
      );
      const items = s.items.length === 0 ? `<p class="empty">(empty)</p>` : chart + s.items.map(renderItem).join("");
      return (
        `<section id="section-${escapeHtml(s.name)}"><h2>${escapeHtml(s.name)} ` +
        `<span class="facts">${escapeHtml(notes.join(" · "))}</span></h2>${items}</section>`
      );
    })
    .join("");

  const metaFacts = [
    `assembly ${escapeHtml(meta.assembly_id ?? "?")}`,
    `${total} tokens`,
    `${tokenCount(meta.total_items)} items`,
    meta.truncated === true ? "truncated" : "not truncated",
    typeof meta.duration_ms === "number" ? `${escapeHtml(Math.round(meta.duration_ms * 10) / 10)} ms` : "",
  ].filter((fact) => fact !== "");
  const missing = asArray(trace.missing_variables).filter((v): v is string => typeof v === "string");
  const nonce = escapeHtml(options.nonce);

  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Assembled context</title>
<style nonce="${nonce}">
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 1rem 2rem; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; border-bottom: 1px solid var(--vscode-panel-border, #8884); }
.facts, .empty { color: var(--vscode-descriptionForeground); font-weight: normal; font-size: 0.9em; }
.chart { display: block; margin: 0.5em 0; overflow: visible; }
.chart .label, .chart .value { fill: var(--vscode-foreground); font-size: 11px; font-family: var(--vscode-font-family); }
.chart .track { fill: var(--vscode-editorWidget-background, #8882); }
.chart .bar { fill: var(--vscode-charts-blue, #3794ff); }
details.item { margin: 0.25em 0; }
details.item summary { cursor: pointer; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--vscode-textCodeBlock-background, #8881); padding: 0.5em; font-family: var(--vscode-editor-font-family); }
code { font-family: var(--vscode-editor-font-family); }
</style>
</head>
<body>
<h1>Assembled context${options.task !== undefined ? `: ${escapeHtml(options.task)}` : ""}</h1>
<p class="facts">${metaFacts.join(" · ")}</p>
${missing.length > 0 ? `<p class="facts">missing variables: ${missing.map((v) => `<code>${escapeHtml(v)}</code>`).join(", ")}</p>` : ""}
${overview}
${sectionHtml}
</body>
</html>
`;
}

/** The HTML of a failed assembly (same CSP). */
export function renderError(message: string, details: readonly string[], options: RenderOptions): string {
  const nonce = escapeHtml(options.nonce);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${nonce}';">
<style nonce="${nonce}">body { font-family: var(--vscode-font-family); color: var(--vscode-errorForeground); }</style>
<title>Assembly failed</title></head>
<body><h1>Assembly failed</h1><p>${escapeHtml(message)}</p>
${details.length > 0 ? `<ul>${details.map((d) => `<li>${escapeHtml(d)}</li>`).join("")}</ul>` : ""}
</body></html>
`;
}
