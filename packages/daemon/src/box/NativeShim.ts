/**
 * The native shim (`native/fleet-shim.c`): one small freestanding program that does what the sh
 * chain of Shim.ts does for a container (shim, setsid, env, nsenter) and for a pod holder
 * (unshare, sh). It exists for speed: on the VMs Fleet runs on, each program start costs about a
 * millisecond, most of it the C library's start-up, and a pod start made six of them. This one
 * has no C library, so an exec of it costs about a tenth of that, and a pod start makes two.
 *
 * It is built from source by the machine's C compiler (`cc`, `gcc` or `clang`) the first time a
 * box needs it, into a cache named by the source's hash, so every box after that (and a new
 * version of the source) finds it at once. Without a compiler, on an architecture it does not
 * support (x86_64 and aarch64 only), or when the build fails, the box uses the sh chain, which
 * does the same.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { which } from "./Tools.js"

/** The protocol `fleet-shim version` prints: bumped when the box and the program must change together. */
export const protocol = "fleet-shim 2"

/** Freestanding and static: no C library, no dynamic loader, no stack protector to set up. */
const flags = [
  "-Os",
  "-static",
  "-nostdlib",
  "-ffreestanding",
  "-fno-builtin",
  "-fno-stack-protector",
  "-fno-asynchronous-unwind-tables",
  "-fno-pie",
  "-no-pie",
  "-w"
]

/** The source, beside `src/` (run from source) or `dist/` (built). */
const sourceFile = (): string | undefined =>
  ["../../native/fleet-shim.c", "../native/fleet-shim.c"]
    .map((rel) => fileURLToPath(new URL(rel, import.meta.url)))
    .find((p) => existsSync(p))

/** A directory only this user can write (the program in it runs as root). */
const privateDir = (dir: string): boolean => {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const s = statSync(dir)
    return s.isDirectory() && s.uid === process.getuid?.() && (s.mode & 0o022) === 0
  } catch {
    return false
  }
}

/** Where built programs are kept: the user's cache, else `fallbackDir` (the box's data dir). */
const cacheDirs = (fallbackDir: string): Array<string> => [
  join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "koder-fleet"),
  join(fallbackDir, "bin")
]

/** Does the program at `path` run and speak this protocol? */
const runs = (path: string): boolean => {
  const r = spawnSync(path, ["version"], { encoding: "utf8", timeout: 10_000 })
  return r.status === 0 && r.stdout.trim() === protocol
}

/** The native shim's path, or why there is none (the box then uses its sh chain). */
export type Found = { readonly path: string } | { readonly reason: string }

const memo = new Map<string, Found>()

/**
 * Find or build the native shim. Built programs are named by the hash of the source, the flags,
 * the compiler and the architecture; a build goes to a temporary name first, is run once, and is
 * renamed into place, so boxes starting together never run a half-written file.
 */
export const find = (fallbackDir: string): Found => {
  const hit = memo.get(fallbackDir)
  if (hit !== undefined) return hit
  const found = locate(fallbackDir)
  // A failure is not remembered across boxes of one process: a compiler may be installed since.
  if ("path" in found) memo.set(fallbackDir, found)
  return found
}

const locate = (fallbackDir: string): Found => {
  if (process.platform !== "linux") return { reason: "not Linux" }
  if (process.arch !== "x64" && process.arch !== "arm64") return { reason: `no native shim for ${process.arch}` }
  const source = sourceFile()
  if (source === undefined) return { reason: "native/fleet-shim.c is not installed" }
  const cc = which("cc") ?? which("gcc") ?? which("clang")
  if (cc === undefined) return { reason: "no C compiler (cc, gcc or clang) to build it" }
  const text = readFileSync(source)
  const hash = createHash("sha256").update(text).update(flags.join(" ")).update(cc).update(process.arch).digest("hex").slice(0, 16)
  let reason = "no private directory to build it in"
  for (const dir of cacheDirs(fallbackDir)) {
    if (!privateDir(dir)) continue
    const path = join(dir, `fleet-shim-${hash}`)
    if (existsSync(path)) return { path }
    const tmp = `${path}.${process.pid}.tmp`
    const r = spawnSync(cc, [...flags, "-o", tmp, source], { encoding: "utf8", timeout: 60_000 })
    if (r.status !== 0) {
      rmSync(tmp, { force: true })
      const message = (r.stderr || r.error?.message || `exit ${r.status}`).trim().split("\n").slice(0, 3).join("; ")
      return { reason: `${cc} could not build it: ${message}` }
    }
    chmodSync(tmp, 0o755)
    if (!runs(tmp)) {
      rmSync(tmp, { force: true })
      reason = `the build in ${dir} does not run`
      continue
    }
    renameSync(tmp, path)
    return { path }
  }
  return { reason }
}
