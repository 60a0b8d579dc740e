// `npm run bench [-- <filter>...]`: run every packages/*/bench/*.bench.ts whose file name starts
// with one of the filter words (all of them without filters), one after another, each in its own
// Node process resolving workspace packages to their sources. Benchmarks print JSON lines to
// stdout, streamed through unchanged; the exit code is non-zero if any benchmark failed.
import { spawn } from "node:child_process"
import { existsSync, readdirSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const filters = process.argv.slice(2)

const benchFiles = () => {
  const packagesDir = join(root, "packages")
  const files = []
  for (const pkg of readdirSync(packagesDir).sort()) {
    const dir = join(packagesDir, pkg, "bench")
    if (!existsSync(dir)) continue
    for (const name of readdirSync(dir).sort()) {
      if (!name.endsWith(".bench.ts")) continue
      if (filters.length > 0 && !filters.some((f) => name.startsWith(f))) continue
      files.push({ pkgDir: join(packagesDir, pkg), file: join(dir, name) })
    }
  }
  return files
}

const runOne = ({ pkgDir, file }) =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", file], {
      cwd: pkgDir,
      stdio: ["ignore", "inherit", "inherit"]
    })
    child.on("error", (error) => {
      console.error(`bench: cannot run ${relative(root, file)}: ${error.message}`)
      resolve(false)
    })
    child.on("exit", (code, signal) => resolve(code === 0 && signal === null))
  })

const files = benchFiles()
if (files.length === 0) {
  console.error(`bench: no benchmark matches ${filters.length > 0 ? filters.join(", ") : "(all)"}`)
  process.exit(1)
}
const failed = []
for (const f of files) {
  console.error(`bench: ${relative(root, f.file)}`)
  if (!(await runOne(f))) failed.push(relative(root, f.file))
}
if (failed.length > 0) {
  console.error(`bench: failed: ${failed.join(", ")}`)
  process.exit(1)
}
