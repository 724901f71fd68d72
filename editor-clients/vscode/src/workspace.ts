/** Which documents and folders concern the extension (no `vscode` import). */

export const CODEBOLT = ".codebolt";
export const DOCUMENT_PATTERN = "**/.codebolt/**";
export const LANGUAGES: readonly string[] = ["json", "jsonc", "yaml"];

/** Where a project's server finds its documents, relative to the project: its own `.codebolt/` only. */
export const PROJECT_PATTERN = ".codebolt/**";

/** A document selector: JSON and YAML files matching `pattern` (a glob, or VS Code's RelativePattern). */
export function documentSelector<P = string>(pattern: P): { scheme: string; language: string; pattern: P }[] {
  return LANGUAGES.map((language) => ({ scheme: "file", language, pattern }));
}

/** Is this file (a file-system path, `/` or `\` separated) inside a `.codebolt/` folder? */
export function isCodeboltPath(fsPath: string): boolean {
  return fsPath.split(/[\\/]/).slice(0, -1).includes(CODEBOLT);
}

/** Does an opened document belong to the server (a file under `.codebolt/` in one of our languages)? */
export function isCodeboltDocument(scheme: string, languageId: string, fsPath: string): boolean {
  return scheme === "file" && LANGUAGES.includes(languageId) && isCodeboltPath(fsPath);
}

/** The projects `.codebolt/` files belong to, each once, in the order first seen. */
export function projectsOf(files: readonly string[]): string[] {
  const projects: string[] = [];
  for (const file of files) {
    const project = projectOf(file);
    if (project !== undefined && !projects.includes(project)) projects.push(project);
  }
  return projects;
}

/**
 * The projects whose servers start when the extension does: every workspace folder holding
 * `.codebolt/` and the project of every open `.codebolt/` document; failing both, the project of
 * the first `.codebolt/` file found in the workspace. Other projects start when one of their
 * documents opens or a command needs them.
 */
export function startupProjects(
  folders: readonly string[],
  hasCodebolt: (folder: string) => boolean,
  openFiles: readonly string[],
  foundFiles: readonly string[],
): string[] {
  const projects = folders.filter(hasCodebolt);
  for (const project of projectsOf(openFiles)) if (!projects.includes(project)) projects.push(project);
  return projects.length ? projects : projectsOf(foundFiles).slice(0, 1);
}

export type Target =
  | { readonly kind: "one"; readonly project: string }
  | { readonly kind: "choose"; readonly projects: readonly string[] }
  | { readonly kind: "none" };

/**
 * Which project a command (assemble, trace page) runs on: the active editor's project, else the
 * only running one, else the only one known, else the user chooses.
 */
export function commandTarget(activeFile: string | undefined, running: readonly string[], known: readonly string[]): Target {
  const active = activeFile === undefined ? undefined : projectOf(activeFile);
  if (active !== undefined) return { kind: "one", project: active };
  if (running.length === 1) return { kind: "one", project: running[0]! };
  const all = [...running, ...known.filter((project) => !running.includes(project))];
  if (all.length === 0) return { kind: "none" };
  return all.length === 1 ? { kind: "one", project: all[0]! } : { kind: "choose", projects: all };
}

/** The project directory of a `.codebolt/` file: the parent of its innermost `.codebolt` folder. */
export function projectOf(fsPath: string): string | undefined {
  const parts = fsPath.split(/([\\/])/);
  for (let i = parts.length - 3; i >= 0; i -= 2) {
    if (parts[i] !== CODEBOLT) continue;
    const dir = parts.slice(0, i).join(""); // ends with the separator before `.codebolt`
    if (dir === "") return undefined; // a relative path starting at .codebolt
    return dir.length > 1 && !/^[A-Za-z]:[\\/]$/.test(dir) ? dir.slice(0, -1) : dir;
  }
  return undefined;
}

/** Is a changed path (a file, or the `.codebolt` folder itself) in `project`'s own `.codebolt/`,
 * not in a nested project's nor in another one's? */
export function ownFile(project: string, fsPath: string): boolean {
  const parts = fsPath.split(/([\\/])/); // separators kept: the path's own one names a file inside
  const inside = parts[parts.length - 1] === CODEBOLT ? `${fsPath}${parts[parts.length - 2] ?? "/"}x` : fsPath;
  return projectOf(inside) === project;
}
