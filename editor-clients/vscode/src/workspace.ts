/** Which documents and folders concern the extension (no `vscode` import). */

export const CODEBOLT = ".codebolt";
export const DOCUMENT_PATTERN = "**/.codebolt/**";
export const LANGUAGES: readonly string[] = ["json", "jsonc", "yaml"];

/** The document selector: JSON and YAML files under a `.codebolt/` folder, by pattern. */
export function documentSelector(): { scheme: string; language: string; pattern: string }[] {
  return LANGUAGES.map((language) => ({ scheme: "file", language, pattern: DOCUMENT_PATTERN }));
}

/** Is this file (a file-system path, `/` or `\` separated) inside a `.codebolt/` folder? */
export function isCodeboltPath(fsPath: string): boolean {
  return fsPath.split(/[\\/]/).slice(0, -1).includes(CODEBOLT);
}

/** Does an opened document belong to the server (a file under `.codebolt/` in one of our languages)? */
export function isCodeboltDocument(scheme: string, languageId: string, fsPath: string): boolean {
  return scheme === "file" && LANGUAGES.includes(languageId) && isCodeboltPath(fsPath);
}

/**
 * The directory the server treats as its workspace root: the first workspace folder holding
 * `.codebolt/`, else the project (parent of `.codebolt`) of the first known `.codebolt/` file,
 * else the first workspace folder.
 */
export function chooseRoot(
  folders: readonly string[],
  hasCodebolt: (folder: string) => boolean,
  codeboltFiles: readonly string[],
): string | undefined {
  const direct = folders.find(hasCodebolt);
  if (direct !== undefined) return direct;
  for (const file of codeboltFiles) {
    const project = projectOf(file);
    if (project !== undefined) return project;
  }
  return folders[0];
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
