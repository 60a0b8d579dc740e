/**
 * The native shim: which launches it takes (the rest keep the sh chain), and how the box builds
 * it once per source into a private cache. The program's behaviour (FIFOs, start errors,
 * namespaces, exit codes) is the box suite's (BoxSuite.ts), run with it and without.
 */
import { spawnSync } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as NativeShim from "../../src/box/NativeShim.js"
import * as Shim from "../../src/box/Shim.js"
import { which } from "../../src/box/Tools.js"

const tools: Shim.Tools = {
  sh: "/bin/sh",
  env: "/usr/bin/env",
  mkfifo: "/usr/bin/mkfifo",
  setsid: "/usr/bin/setsid",
  envDefaultSignal: true,
  nsenter: "/usr/bin/nsenter",
  nsenterWdns: true,
  unshare: "/usr/bin/unshare",
  setpriv: "/usr/bin/setpriv",
  native: "/cache/fleet-shim-abc"
}

const workload = (over: Partial<Shim.Workload> = {}): Shim.Workload => ({
  ctx: { holderPid: 42, net: true, user: undefined },
  workingDir: "/srv",
  argv: ["sleep", "3600"],
  env: { PATH: "/usr/bin:/bin", GREETING: "it's here" },
  cgroupFiles: ["/sys/fs/cgroup/memory/fleet/p/c/cgroup.procs"],
  ...over
})

/** The NUL-terminated strings of a native launch file, after its magic line. */
const fields = (text: string): Array<string> => {
  expect(text.startsWith(Shim.nativeMagic)).toBe(true)
  return text.slice(Shim.nativeMagic.length).split("\0").slice(0, -1)
}

describe("Shim.launchFile: the native shim or the sh chain", () => {
  it.each([
    { name: "a plain container in a pod", w: workload(), t: tools, native: true },
    { name: "a container outside any pod namespaces", w: workload({ ctx: { holderPid: undefined, user: undefined } }), t: tools, native: true },
    { name: "a variable sh cannot export", w: workload({ env: { PATH: "/bin", "my.var": "1" } }), t: tools, native: true },
    { name: "a container that runs as another user", w: workload({ ctx: { holderPid: 42, user: { uid: 1000 } } }), t: tools, native: false },
    { name: "a box without the native shim", w: workload(), t: { ...tools, native: undefined }, native: false }
  ])("$name: native $native", ({ w, t, native }) => {
    expect(Shim.nativeFits(t, w)).toBe(native)
    const text = Shim.launchFile(t, "/run/c1", w)
    if (native) {
      const f = fields(text)
      expect(f[0]).toBe("shim")
      // The environment as it is (no quoting: NUL ends each entry), then an empty string.
      expect(f.slice(1, f.indexOf(""))).toEqual(Object.entries(w.env).map(([k, v]) => `${k}=${v}`))
      expect(text).not.toContain(tools.setsid)
    } else {
      expect(text.startsWith(Shim.nativeMagic)).toBe(false)
      expect(text).toContain(`export GREETING='it'\\''s here'`)
      expect(text).toContain(tools.setsid)
    }
  })

  it("passes cgroups, the holder, the pod network and the working directory as the shim's arguments", () => {
    const f = fields(Shim.launchFile(tools, "/run/c1", workload()))
    expect(f.slice(f.indexOf("") + 1)).toEqual(["/run/c1", "-c", "/sys/fs/cgroup/memory/fleet/p/c/cgroup.procs", "-t", "42", "-n", "-w", "/srv", "--", "sleep", "3600"])
    const plain = fields(Shim.launchFile(tools, "/run/c1", workload({ ctx: { holderPid: undefined, user: undefined }, workingDir: "", cgroupFiles: [] })))
    expect(plain.slice(plain.indexOf("") + 1)).toEqual(["/run/c1", "--", "sleep", "3600"])
  })

  it("passes the steps making the container's cgroup, in order, before the cgroups to join", () => {
    const steps = [{ mkdir: "/sys/fs/cgroup/memory/fleet/p/c" }, { write: ["/sys/fs/cgroup/memory/fleet/p/c/memory.limit_in_bytes", "67108864"] as const }]
    const f = fields(Shim.launchFile(tools, "/run/c1", workload({ cgroupSteps: steps })))
    expect(f.slice(f.indexOf("") + 1, f.indexOf("-t"))).toEqual([
      "/run/c1",
      "-m",
      "/sys/fs/cgroup/memory/fleet/p/c",
      "-l",
      "/sys/fs/cgroup/memory/fleet/p/c/memory.limit_in_bytes",
      "67108864",
      "-c",
      "/sys/fs/cgroup/memory/fleet/p/c/cgroup.procs"
    ])
    expect(fields(Shim.holderFile(tools, () => "/run/idle.fifo", false, "web", [steps[0]!]))).toEqual(["holder", "", "web", "-m", "/sys/fs/cgroup/memory/fleet/p/c"])
  })

  it("the sh chain gets the cgroups in FLEET_SHIM_CGROUPS", () => {
    const text = Shim.launchFile({ ...tools, native: undefined }, "/run/c1", workload())
    expect(text).toContain(`export FLEET_SHIM_CGROUPS='/sys/fs/cgroup/memory/fleet/p/c/cgroup.procs'`)
  })

  it("a pod holder is the native launcher's holder, or unshare with the idle FIFO", () => {
    let idleAsked = 0
    const idle = () => (idleAsked++, "/run/idle.fifo")
    expect(fields(Shim.holderFile(tools, idle, true))).toEqual(["holder", "net", ""])
    expect(fields(Shim.holderFile(tools, idle, false, "odd host"))).toEqual(["holder", "", "odd host"])
    expect(idleAsked).toBe(0)
    expect(Shim.holderFile({ ...tools, native: undefined }, idle, false)).toContain(`3<>'/run/idle.fifo'`)
    expect(idleAsked).toBe(1)
  })
})

const compiler = ["cc", "gcc", "clang"].some((cc) => which(cc) !== undefined)

describe.runIf(compiler && process.platform === "linux")("NativeShim.find: built once, into a private directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "native-shim-"))
  const saved = process.env.XDG_CACHE_HOME
  afterAll(() => {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME
    else process.env.XDG_CACHE_HOME = saved
    rmSync(dir, { recursive: true, force: true })
  })

  it("builds into the user's cache, runs, and is found there by the next box without a rebuild", () => {
    process.env.XDG_CACHE_HOME = join(dir, "cache")
    const found = NativeShim.find(join(dir, "box1"))
    if (!("path" in found)) throw new Error(found.reason)
    expect(found.path.startsWith(join(dir, "cache", "koder-fleet", "fleet-shim-"))).toBe(true)
    expect(spawnSync(found.path, ["version"], { encoding: "utf8" }).stdout.trim()).toBe(NativeShim.protocol)
    expect(statSync(join(dir, "cache", "koder-fleet")).mode & 0o777).toBe(0o700)
    const built = statSync(found.path).mtimeMs
    const again = NativeShim.find(join(dir, "box2"))
    expect(again).toEqual(found)
    expect(statSync(found.path).mtimeMs).toBe(built)
  })

  it("does not use a cache others can write to: it builds in the box's data dir instead", () => {
    process.env.XDG_CACHE_HOME = join(dir, "shared")
    const first = NativeShim.find(join(dir, "box3"))
    expect("path" in first).toBe(true)
    chmodSync(join(dir, "shared", "koder-fleet"), 0o777)
    const found = NativeShim.find(join(dir, "box4"))
    if (!("path" in found)) throw new Error(found.reason)
    expect(found.path.startsWith(join(dir, "box4", "bin", "fleet-shim-"))).toBe(true)
  })

  it("a usage error is exit 2, not a crash; the launcher ends with its input", () => {
    const found = NativeShim.find(join(dir, "box1"))
    if (!("path" in found)) throw new Error(found.reason)
    expect(spawnSync(found.path, []).status).toBe(2)
    expect(spawnSync(found.path, ["launcher"]).status).toBe(2)
    expect(spawnSync(found.path, ["launcher", "/bin/sh"], { input: "" }).status).toBe(0)
  })

  it("the launcher runs an sh launch file with the token and the arg, and ignores a malformed line", () => {
    const found = NativeShim.find(join(dir, "box1"))
    if (!("path" in found)) throw new Error(found.reason)
    const file = join(dir, "hello.sh")
    writeFileSync(file, 'echo "$1 got $2"\n')
    const r = spawnSync(found.path, ["launcher", "/bin/sh"], { input: `t1 -\nnot-a-request\nt2 hello ${file}\n`, encoding: "utf8", timeout: 10_000 })
    expect(r.status).toBe(0)
    // The launch is a grandchild: the launcher may end before it answers, so wait for the pipe's end.
    expect(r.stdout).toBe("t2 got hello\n")
  })

  it("a pod holder whose namespaces cannot be made is answered at once, by the launcher", () => {
    const found = NativeShim.find(join(dir, "box1"))
    if (!("path" in found)) throw new Error(found.reason)
    // Unprivileged, the launcher may not make a pid namespace: as root, run it as nobody.
    const open = mkdtempSync(join(tmpdir(), "fleet-shim-nobody-"))
    chmodSync(open, 0o755)
    const program = join(open, "fleet-shim")
    writeFileSync(program, readFileSync(found.path), { mode: 0o755 })
    const file = join(open, "holder.launch")
    writeFileSync(file, Shim.holderFile({ ...tools, native: program }, () => "/nonexistent", false, "web"), { mode: 0o644 })
    const asRoot = process.getuid?.() === 0
    const argv = asRoot ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", program] : [program]
    const r = spawnSync(argv[0]!, [...argv.slice(1), "launcher", "/bin/sh"], { input: `t3 web ${file}\n`, encoding: "utf8", timeout: 10_000 })
    rmSync(open, { recursive: true, force: true })
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^t3 \d+ -\n$/)
  })
})
