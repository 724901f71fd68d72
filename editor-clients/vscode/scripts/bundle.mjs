// Bundles src/extension.ts and vscode-languageclient into dist/extension.js (CommonJS, Node, `vscode` external).
import { build } from "esbuild";

const production = !process.argv.includes("--dev");

await build({
  entryPoints: ["src/extension.ts"],
  outfile: "dist/extension.js",
  bundle: true,
  platform: "node",
  target: "node18",
  format: "cjs",
  external: ["vscode"],
  minify: production,
  sourcemap: production ? false : "inline",
  legalComments: "none",
  logLevel: "info",
});
