/**
 * Schemas for VS Code's own JSON language service, chosen so it never repeats the server's
 * diagnostics (no `vscode` import).
 *
 * Definition files carry `"$schema": "urn:context-assembly:schema:<kind>"`. VS Code's JSON service
 * honours `$schema` and asks the editor for that document: unanswered, it puts an "Unable to load
 * schema" warning on every definition file; answered with the real schema, it would validate,
 * complete and hover the same things the server already does (twice the problems, twice the
 * completions). So the extension answers the `urn:` documents itself:
 *
 * - kinds the server serves in the editor (rule engines, context rules, persistent memory, ingestion
 *   pipelines, graph views, rule tests) get a permissive schema — the server is the single source of their
 *   schema and meaning diagnostics, completion and hover;
 * - kinds the server does not serve in the editor (settings `.codebolt/context-assembly.json`,
 *   assembly requests and results) get the real published schema.
 */

export const URN_PREFIX = "urn:context-assembly:schema:";

/** Validated, completed and hovered by the server: VS Code's JSON service gets an empty schema. */
export const SERVER_VALIDATED: readonly string[] = [
  "rule-engine",
  "context-rules",
  "persistent-memory",
  "ingestion-pipeline",
  "graph-view",
  "rule-test",
];

/** Not served by the server in the editor: VS Code's JSON service gets the published schema. */
export const EDITOR_VALIDATED: readonly string[] = ["settings", "assembly-request", "assembled-context"];

/** The bundled file of a published schema (`schemas/<kind>.schema.json` in the extension). */
export function schemaFile(kind: string): string {
  return `${kind}.schema.json`;
}

/**
 * The JSON text to serve for `urn` (scheme + ":" + path), or undefined when it is not one of ours.
 * `readBundled(file)` returns a bundled schema's text (undefined when missing).
 */
export function schemaForUrn(urn: string, readBundled: (file: string) => string | undefined): string | undefined {
  if (!urn.startsWith(URN_PREFIX)) return undefined;
  const kind = urn.slice(URN_PREFIX.length).replace(/[?#].*$/, "");
  if (SERVER_VALIDATED.includes(kind)) {
    return JSON.stringify(
      {
        $id: `${URN_PREFIX}${kind}`,
        title: `Context Assembly ${kind} (validated by the server)`,
        description:
          "Checked by the Context Assembly server (diagnostics, completion, hover). Intentionally empty " +
          "for VS Code's JSON service so the same problems are not reported twice.",
      },
      null,
      2,
    );
  }
  if (EDITOR_VALIDATED.includes(kind)) return readBundled(schemaFile(kind));
  return undefined;
}
