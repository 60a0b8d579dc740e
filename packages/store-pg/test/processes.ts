// Child processes for the multi-process tests: fixtures run with tsx, their stdout as lines.
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** A running fixture and the lines it has printed so far. */
export interface Fixture {
  readonly child: ChildProcess
  readonly lines: Array<string>
  readonly exited: Promise<number | null>
  readonly stderr: () => string
  /** Write a line to its stdin. */
  readonly send: (line: string) => void
}

/** Start `test/fixtures/<name>.ts` with `args`. */
export const startFixture = (name: string, args: ReadonlyArray<string>): Fixture => {
  const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", `test/fixtures/${name}.ts`, ...args], {
    cwd: packageDir,
    stdio: ["pipe", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  readline.createInterface({ input: child.stdout! }).on("line", (line) => lines.push(line))
  let err = ""
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  child.stdin!.on("error", () => {})
  return { child, lines, exited, stderr: () => err, send: (line) => void child.stdin!.write(`${line}\n`) }
}
