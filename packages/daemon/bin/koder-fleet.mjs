#!/usr/bin/env node
// `koder-fleet` from the repository: the built daemon (dist/main.js) when there is one, otherwise
// the TypeScript sources through tsx, so `npx koder-fleet` works right after `npm install`. From
// sources the daemon runs as a child (Node's resolution conditions are set at its start); the
// signals a supervisor or a terminal sends reach it, and its exit is this process's.
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const dist = new URL("../dist/main.js", import.meta.url)
if (existsSync(fileURLToPath(dist))) {
  await import(dist.href)
} else {
  const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
  const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", main, ...process.argv.slice(2)], { stdio: "inherit" })
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) process.on(signal, () => child.kill(signal))
  child.on("exit", (code, signal) => {
    if (signal !== null) {
      process.removeAllListeners(signal)
      process.kill(process.pid, signal)
    } else process.exitCode = code ?? 1
  })
}
