/**
 * Test fixture for the runc driver and the image store: a real busybox rootfs tarball built from
 * the host's static busybox (Debian `busybox-static`), and the checks that the tools are there.
 * Missing tools fail the tests with what to install; they are never skipped.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs"
import { join } from "node:path"

/** The static busybox the rootfs is made of. */
export const busybox = "/bin/busybox"

const applets = [
  "sh", "sleep", "cat", "echo", "head", "tail", "ls", "ps", "true", "false", "kill", "id", "hostname",
  "env", "touch", "mkdir", "rm", "wc", "grep", "test", "pwd", "dd", "yes"
]

/** Fail (not skip) unless this machine can run the runc tests: root, runc, a static busybox. */
export const requireRunc = (): void => {
  if (process.getuid?.() !== 0) throw new Error("the runc driver tests run as root (as this project's machines and CI do)")
  if (spawnSync("runc", ["--version"]).status !== 0)
    throw new Error("runc is not installed: apt-get install -y runc busybox-static (.ci/run does it)")
  if (!existsSync(busybox)) throw new Error(`${busybox} is missing: apt-get install -y busybox-static`)
  // A dynamically linked busybox would not start in a rootfs without its loader.
  if (hasInterpreter(readFileSync(busybox)))
    throw new Error(`${busybox} is dynamically linked: apt-get install -y busybox-static`)
}

/** Does a 64-bit little-endian ELF file name a program interpreter (PT_INTERP: dynamically linked)? */
const hasInterpreter = (elf: Buffer): boolean => {
  const phoff = Number(elf.readBigUInt64LE(0x20))
  const size = elf.readUInt16LE(0x36)
  const count = elf.readUInt16LE(0x38)
  for (let i = 0; i < count; i++) if (elf.readUInt32LE(phoff + i * size) === 3) return true
  return false
}

/**
 * Build a busybox rootfs under `dir` and tar it: `<dir>/busybox.tar` (plain) or `.tar.gz`.
 * `extra` files (path → content) make distinct images.
 */
export const busyboxTarball = (dir: string, options: { gzip?: boolean; extra?: Record<string, string> } = {}): string => {
  const root = join(dir, `rootfs-${Math.random().toString(36).slice(2, 8)}`)
  for (const d of ["bin", "etc", "tmp", "proc", "sys", "dev", "root"]) mkdirSync(join(root, d), { recursive: true })
  chmodSync(join(root, "tmp"), 0o1777)
  copyFileSync(busybox, join(root, "bin", "busybox"))
  chmodSync(join(root, "bin", "busybox"), 0o755)
  for (const a of applets) symlinkSync("busybox", join(root, "bin", a))
  execFileSync("sh", ["-c", 'echo "root:x:0:0:root:/root:/bin/sh" >"$1/etc/passwd"', "sh", root])
  for (const [path, content] of Object.entries(options.extra ?? {})) {
    mkdirSync(join(root, path, ".."), { recursive: true })
    execFileSync("sh", ["-c", 'printf %s "$2" >"$1"', "sh", join(root, path), content])
  }
  const file = join(dir, `busybox-${Math.random().toString(36).slice(2, 8)}.tar${options.gzip ? ".gz" : ""}`)
  execFileSync("tar", [options.gzip ? "-czf" : "-cf", file, "-C", root, "."])
  return file
}
