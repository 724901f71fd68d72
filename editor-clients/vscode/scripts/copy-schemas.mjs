// Copies the published JSON Schemas (../../schemas/*.schema.json) into ./schemas for packaging.
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const source = resolve(here, "..", "..", "schemas");
const target = join(here, "schemas");

const files = readdirSync(source).filter((name) => name.endsWith(".schema.json")).sort();
if (files.length === 0) {
  console.error(`no *.schema.json in ${source}`);
  process.exit(1);
}
rmSync(target, { recursive: true, force: true });
mkdirSync(target, { recursive: true });
for (const name of files) copyFileSync(join(source, name), join(target, name));
console.log(`copied ${files.length} schemas from ${source}`);
