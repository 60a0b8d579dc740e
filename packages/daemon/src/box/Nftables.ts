/**
 * Running `nft` and `ip`: the host's packet filter and links are programmed through the
 * commands every Linux distribution ships (nftables and iproute2), not netlink bindings. The
 * rulesets are a few dozen lines applied when something changes, so a process per change costs
 * nothing that matters; the commands give the clearest error messages; an operator can replay
 * exactly what Fleet did (`nft -f`, `ip ...`); and there is no native addon to build. Commands
 * run asynchronously (the box and the agent keep serving meanwhile), optionally inside a network
 * namespace (`nsenter --net=PATH`).
 */
import { spawn } from "node:child_process"
import { which } from "./Tools.js"

/** A command that failed: its argv and what it printed. */
export class CommandError extends Error {
  constructor(
    readonly argv: ReadonlyArray<string>,
    readonly code: number | null,
    readonly stderr: string
  ) {
    super(`${argv.join(" ")}: ${stderr.trim() || `exit ${code}`}`)
  }
}


/** Where to run: the caller's network namespace, or the one at `netns` (a `/proc/PID/ns/net` path). */
export interface Where {
  readonly netns?: string
}

/** Run `argv` (with `input` on stdin); resolves with stdout, rejects with a CommandError. */
export const run = (argv: ReadonlyArray<string>, input?: string, where: Where = {}): Promise<string> => {
  const full = where.netns === undefined ? argv : [which("nsenter") ?? "nsenter", `--net=${where.netns}`, "--", ...argv]
  return new Promise((resolve, reject) => {
    const child = spawn(full[0]!, full.slice(1), { stdio: ["pipe", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (err += d.toString()))
    child.once("error", (e) => reject(new CommandError(full, null, e.message)))
    child.once("close", (code) => (code === 0 ? resolve(out) : reject(new CommandError(full, code, err))))
    child.stdin.on("error", () => undefined)
    child.stdin.end(input ?? "")
  })
}

/** The nft binary, when installed. */
export const nft = (): string | undefined => which("nft")

/** Apply an nftables script (`nft -f -`): one transaction, all or nothing. */
export const apply = (script: string, where: Where = {}): Promise<void> =>
  run([nft() ?? "nft", "-f", "-"], script, where).then(() => undefined)

/** Whether table `family name` exists. */
export const hasTable = async (family: string, name: string, where: Where = {}): Promise<boolean> =>
  run([nft() ?? "nft", "list", "table", family, name], undefined, where).then(
    () => true,
    () => false
  )

/**
 * Run `ip -batch -` with `lines`, one command each (`link set lo up`, …). `force`: go on past a
 * failing line (the batch still fails, naming it, after the others ran).
 */
export const ipBatch = (lines: ReadonlyArray<string>, where: Where = {}, force = false): Promise<void> =>
  lines.length === 0
    ? Promise.resolve()
    : run([which("ip") ?? "ip", ...(force ? ["-force"] : []), "-batch", "-"], `${lines.join("\n")}\n`, where).then(() => undefined)

/** Run one `ip` command; resolves with its output. */
export const ip = (args: ReadonlyArray<string>, where: Where = {}): Promise<string> => run([which("ip") ?? "ip", ...args], undefined, where)
