#!/usr/bin/env node
// `kfleet` from the repository: the built CLI (dist/main.js) when there is one, otherwise the
// TypeScript sources through tsx, so `npx kfleet` works right after `npm install`.
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const dist = new URL("../dist/main.js", import.meta.url)
if (existsSync(fileURLToPath(dist))) {
  await import(dist.href)
} else {
  const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
  const r = spawnSync(process.execPath, ["--conditions=@koder/source", "--import", "tsx", main, ...process.argv.slice(2)], { stdio: "inherit" })
  process.exitCode = r.status ?? 1
}
