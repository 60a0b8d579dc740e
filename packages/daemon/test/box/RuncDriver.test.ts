/**
 * The runc driver as root, with the real runc and a real busybox rootfs: containers run from an
 * imported image in their own namespaces, log, exec, stop with grace, die at their memory limit
 * (137, OOMKilled), and outlive the driver: a second one on the same data dir adopts them, once.
 * Nothing is left behind: no runc container, process, mount or cgroup.
 */
import type { Runtime, StreamSession } from "@koder/fleet-core"
import { RuntimeContract } from "@koder/fleet-core/testing"
import { Chunk, Effect, Exit, Stream } from "effect"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RuncDriver from "../../src/box/RuncDriver.js"
import { eventually, marker, podSpec, processesWith } from "./BoxProcess.js"
import { busyboxTarball, requireRunc } from "./RuncFixture.js"

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = async <A, E>(effect: Effect.Effect<A, E>): Promise<E> => {
  const exit = await Effect.runPromiseExit(effect)
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

describe("runc driver (root, real runc and busybox)", () => {
  let dir: string
  let dataDir: string
  let handle: RuncDriver.Handle
  let rt: Runtime.RuntimeService
  let sandbox: Runtime.Sandbox
  let digest: string
  const marks: Array<string> = []

  /** runc's containers under the driver's root. */
  const runcList = (): Array<{ id: string; status: string }> => {
    const r = spawnSync("runc", ["--root", join(dataDir, "runc", "state"), "list", "--format", "json"], { encoding: "utf8" })
    return (JSON.parse(r.stdout.trim() || "null") ?? []) as Array<{ id: string; status: string }>
  }

  /** A busybox container running `sh -c script`, its marker as $0 (to find its processes). */
  const create = (name: string, script: string, extra: Partial<Runtime.ContainerSpec> = {}) => {
    const mark = marker(name)
    marks.push(mark)
    return run(
      rt.containers.create({ sandboxId: sandbox.id, name, attempt: 0, image: "busybox:test", command: ["sh", "-c", script, mark], ...extra })
    )
  }
  const started = async (name: string, script: string, extra: Partial<Runtime.ContainerSpec> = {}) => {
    const id = await create(name, script, extra)
    await run(rt.containers.start(id))
    return id
  }
  const lines = async (id: string) => Chunk.toArray(await run(Stream.runCollect(rt.containers.logs(id)))).map((l) => l.line)
  const exited = (id: string, ms = 20_000) =>
    eventually(async () => {
      const s = (await run(rt.containers.inspect(id))).status
      return s.state === "exited" ? s : undefined
    }, ms, `container ${id} to exit`)

  beforeAll(async () => {
    requireRunc()
    dir = mkdtempSync(join(tmpdir(), "kbox-runc-"))
    dataDir = join(dir, "data")
    handle = RuncDriver.open({ dataDir })
    rt = handle.runtime
    digest = (await run(rt.images.import({ name: "busybox:test", path: busyboxTarball(dir) }))).digest
    sandbox = await run(rt.sandboxes.create({ ...podSpec("runc"), hostname: "runc-pod" }))
  })

  afterAll(async () => {
    if (rt) for (const s of await run(rt.sandboxes.list()).catch(() => [])) await run(rt.sandboxes.remove(s.id)).catch(() => undefined)
    handle?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("is an OCI runtime with namespaces and enforced limits", async () => {
    const info = await run(rt.info)
    expect(info.driver).toBe("runc")
    expect(info.capabilities).toMatchObject({
      isolation: "oci",
      namespaces: ["pid", "mount", "uts", "ipc"],
      limits: { cpu: true, memory: true, pids: true },
      bindMounts: true,
      runAsUser: true,
      podNetwork: false
    })
    expect(info.capabilities.cgroups).not.toBe("none")
    expect(sandbox.state).toBe("ready")
  })

  it("runs sh -c 'echo hello; sleep 30' from the image in its own pid namespace and the pod's hostname, and logs it", async () => {
    const id = await started("hello", "echo hello; echo $$ $(hostname) >&2; sleep 30")
    const c = await run(rt.containers.inspect(id))
    expect(c.status.state).toBe("running")
    expect(c.status.pid).toBeGreaterThan(1)
    const out = await eventually(async () => {
      const l = await lines(id)
      return l.length >= 2 ? l : undefined
    }, 10_000, "hello in the log")
    expect(out).toContain("hello\n")
    // pid 1 of its own pid namespace; the hostname of its pod's UTS namespace.
    expect(out).toContain("1 runc-pod\n")
    const chunks = Chunk.toArray(await run(Stream.runCollect(rt.containers.logs(id, { timestamps: true, tailLines: 1 }))))
    expect(chunks).toHaveLength(1)
    expect(chunks[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT/)
    // The log is the process driver's CRI file format (stdout and stderr in the order they were read).
    const file = readFileSync(join(dataDir, "runc", "containers", id, "container.log"), "utf8")
    expect(file).toMatch(/^\S+Z stdout F hello$/m)
    expect(file).toMatch(/^\S+Z stderr F 1 runc-pod$/m)
    const stats = await run(rt.containers.stats(id))
    expect(stats.pids).toBe(1)
    expect(stats.memory.workingSetBytes).toBeGreaterThan(0)
    const procs = await run(rt.containers.processes(id))
    expect(procs.map((p) => p.command)).toEqual(["sleep"])
    expect(await run(rt.containers.list({ labels: {}, state: "running" }))).toHaveLength(1)
  })

  it("streaming exec in the container: one output stream for a TTY request, TERM, the exit code; a missing command ends 126", async () => {
    const [id] = (await run(rt.containers.list({ name: "hello" }))).map((c) => c.id)
    const drain = (session: StreamSession.StreamSession) => run(RuntimeContract.drain(session))
    const tty = await drain(await run(rt.containers.execStream(id!, { command: ["sh", "-c", 'echo "term=$TERM"; echo err >&2; ls /etc/os-release'], stdin: false, tty: true })))
    // The image's filesystem (busybox has no os-release); stderr comes on stdout, as on a terminal.
    expect(tty.outcome).toEqual({ exitCode: 1 })
    // Both lines arrive on the one stream; runc's console and the shell's two writes need not keep their order.
    expect(tty.stdout).toContain("term=xterm\n")
    expect(tty.stdout).toContain("err\n")
    expect(tty.stderr).toBe("")
    const missing = await drain(await run(rt.containers.execStream(id!, { command: ["no-such-command"], stdin: false, tty: false })))
    expect(missing.outcome).toEqual({ exitCode: 126 })
    expect(missing.stderr).toMatch(/no-such-command/)
  })

  it("exec runs in the container: output, exit code, env, working dir, stdin; a missing command exits 126", async () => {
    const [id] = (await run(rt.containers.list({ name: "hello" }))).map((c) => c.id)
    const r = await run(
      rt.containers.exec(id!, {
        command: ["sh", "-c", 'echo out $GREETING $(pwd); cat; echo err >&2; exit 3'],
        env: { GREETING: "hi" },
        workingDir: "/tmp",
        stdin: "from stdin\n"
      })
    )
    expect(r).toEqual({ exitCode: 3, stdout: "out hi /tmp\nfrom stdin\n", stderr: "err\n", timedOut: false })
    // It sees the container's filesystem (the image's), not the host's.
    const ls = await run(rt.containers.exec(id!, { command: ["ls", "/bin/busybox", "/etc/passwd"] }))
    expect(ls.exitCode).toBe(0)
    expect((await run(rt.containers.exec(id!, { command: ["cat", "/etc/os-release"] }))).exitCode).not.toBe(0)
    const missing = await run(rt.containers.exec(id!, { command: ["no-such-command"] }))
    expect(missing.exitCode).toBe(126)
    expect(missing.stderr).toMatch(/no-such-command/)
    const slow = await run(rt.containers.exec(id!, { command: ["sleep", "30"], timeoutMs: 300 }))
    expect(slow).toMatchObject({ exitCode: 137, timedOut: true })
    // Writes go to the container's own layer, never to the image.
    expect((await run(rt.containers.exec(id!, { command: ["touch", "/bin/written"] }))).exitCode).toBe(0)
    expect(existsSync(join(dataDir, "images", "sha256", digest.slice(7), "rootfs", "bin", "written"))).toBe(false)
  })

  it("stops with grace: a TERM trap ends it cleanly; pid 1 without a trap ignores TERM and is killed after the grace", async () => {
    const trapping = await started("trap", "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.1; done")
    await eventually(async () => (await lines(trapping)).includes("ready\n") || undefined, 10_000, "ready")
    // A follower sees the last line and ends with the container.
    const followed = run(Stream.runCollect(rt.containers.logs(trapping, { follow: true })))
    const t0 = Date.now()
    const status = await run(rt.containers.stop(trapping, { gracePeriodMs: 10_000 }))
    expect(status).toMatchObject({ state: "exited", exitCode: 0, reason: "Completed" })
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(Chunk.toArray(await followed).map((l) => l.line)).toEqual(["ready\n", "bye\n"])

    const [hello] = (await run(rt.containers.list({ name: "hello" }))).map((c) => c.id)
    const t1 = Date.now()
    const killed = await run(rt.containers.stop(hello!, { gracePeriodMs: 500 }))
    expect(Date.now() - t1).toBeGreaterThanOrEqual(450)
    expect(killed).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL", reason: "Error" })
    // Idempotent, and the final status stays.
    expect(await run(rt.containers.stop(hello!, { gracePeriodMs: 0 }))).toEqual(killed)
    expect((await fail(rt.containers.exec(hello!, { command: ["true"] })))._tag).toBe("RuntimeInvalid")
    expect((await fail(rt.containers.signal(hello!, "SIGTERM")))._tag).toBe("RuntimeInvalid")
  })

  it("a container with a 32Mi memory limit running a hog is OOM-killed: exit 137, reason OOMKilled", async () => {
    const id = await started("hog", "echo ready; x=0123456789abcdef; while :; do x=$x$x; done", {
      resources: { memoryBytes: 32 * 1024 * 1024, cpuMillis: 1000, pids: 20 }
    })
    const early = await run(rt.containers.stats(id)).catch(() => undefined)
    if (early) expect(early.memory.limitBytes).toBe(32 * 1024 * 1024)
    const status = await exited(id)
    expect(status).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL", reason: "OOMKilled" })
    expect(await lines(id)).toContain("ready\n")
  })

  it("signals the main process; exits with its code; a command the image lacks is a StartError", async () => {
    const id = await started("usr1", "trap 'echo got usr1; exit 7' USR1; echo ready; while :; do sleep 0.1; done")
    await eventually(async () => (await lines(id)).includes("ready\n") || undefined, 10_000, "ready")
    await run(rt.containers.signal(id, "USR1"))
    expect(await exited(id)).toMatchObject({ exitCode: 7, reason: "Error" })
    expect(await lines(id)).toContain("got usr1\n")
    expect((await fail(rt.containers.signal(id, "SIGNOPE")))._tag).toBe("RuntimeInvalid")

    const bad = await run(rt.containers.create({ sandboxId: sandbox.id, name: "bad", attempt: 0, image: "busybox:test", command: ["/no/such/binary"] }))
    await run(rt.containers.start(bad))
    const s = await exited(bad)
    expect(s).toMatchObject({ exitCode: 128, reason: "StartError" })
    expect(s.message).toMatch(/no such file|not found/i)
  })

  it("runs as the spec's user, in its working dir, with its env and bind mounts (read-write and read-only)", async () => {
    const shared = mkdtempSync(join(dir, "mount-"))
    writeFileSync(join(shared, "in.txt"), "from the host\n")
    // Host permissions hold inside: uid 1000 may enter and write here.
    chmodSync(shared, 0o777)
    const id = await started(
      "user",
      'echo "$(id -u):$(id -g) $(pwd) $GREETING"; cat /in/in.txt; echo written >/out/out.txt; touch /in/nope 2>/dev/null || echo read-only',
      {
        user: { uid: 1000, gid: 1000 },
        workingDir: "/tmp",
        env: { GREETING: "hello" },
        mounts: [
          { hostPath: shared, containerPath: "/in", readOnly: true },
          { hostPath: shared, containerPath: "/out" }
        ]
      }
    )
    expect(await exited(id)).toMatchObject({ exitCode: 0, reason: "Completed" })
    expect(await lines(id)).toEqual(["1000:1000 /tmp hello\n", "from the host\n", "read-only\n"])
    expect(readFileSync(join(shared, "out.txt"), "utf8")).toBe("written\n")
  })

  it("runs each pod in a user namespace of its own: root is an unprivileged host id, two pods' ranges are disjoint", async () => {
    expect(handle.userns, "this kernel allows user namespaces: the probe must say so").toEqual({ enabled: true })
    /** A container's uid_map lines and the host uid of its init (from /proc/<pid>/status). */
    const mapped = async (sandboxId: string, name: string, extra: Partial<Runtime.ContainerSpec> = {}) => {
      const mark = marker(name)
      marks.push(mark)
      const id = await run(
        rt.containers.create({ sandboxId, name, attempt: 0, image: "busybox:test", command: ["sh", "-c", "sleep 30", mark], ...extra })
      )
      await run(rt.containers.start(id))
      const pid = await eventually(async () => (await run(rt.containers.inspect(id))).status.pid, 10_000, `${name}'s pid`)
      const map = (await run(rt.containers.exec(id, { command: ["cat", "/proc/self/uid_map"] }))).stdout
      const rows = map.trim().split("\n").map((l) => l.trim().split(/\s+/).map(Number) as [number, number, number])
      const hostUid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1])
      return { id, rows, hostUid }
    }
    // A request without security runs as root in the container: an unprivileged id on the host.
    const a = await mapped(sandbox.id, "userns-root")
    expect(a.rows).not.toContainEqual([0, 0, 4294967295])
    const [zero, first, size] = a.rows[0]!
    expect(zero).toBe(0)
    expect(size).toBe(65536)
    expect(first).toBeGreaterThanOrEqual(1_000_000)
    expect(a.hostUid).toBe(first)
    // The pod's range is recorded with it (a restarted box keeps it).
    expect(JSON.parse(readFileSync(join(dataDir, "runc", "sandboxes", `${sandbox.id}.json`), "utf8"))).toMatchObject({ ids: first })
    // Its rootfs is bind-mounted under /run for runc, behind a directory only the pod's root may
    // pass: another host user cannot read it (mount points are public in /proc/*/mountinfo).
    const parent = join("/run", `kbox-${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`, a.id)
    expect(statSync(parent)).toMatchObject({ uid: 0, gid: first, mode: 0o40710 })
    const nobody = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "ls", join(parent, "rootfs", "bin")], { encoding: "utf8" })
    expect(nobody.status, nobody.stdout).not.toBe(0)
    expect(nobody.stderr).toMatch(/Permission denied/)
    // Its root owns the image's files (the rootfs copy is shifted), but not the host's.
    const owned = mkdtempSync(join(dir, "root-owned-"))
    chmodSync(owned, 0o755)
    const r = await run(
      rt.containers.exec(a.id, { command: ["sh", "-c", "echo ok >/etc/written && cat /etc/written; id -u; ls -ldn /"] })
    )
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/^ok\n0\ndrwx\S+\s+\d+\s+0\s+0\s/)
    const hostRoot = await mapped(sandbox.id, "userns-host", { mounts: [{ hostPath: owned, containerPath: "/host" }] })
    const denied = await run(rt.containers.exec(hostRoot.id, { command: ["sh", "-c", "touch /host/x 2>&1 || echo denied"] }))
    expect(denied.stdout).toContain("denied")
    expect(existsSync(join(owned, "x"))).toBe(false)
    // A confined container runs as the pod's uid, mapped to itself: the volumes the agent gives
    // that uid (0700) stay its own.
    const vol = mkdtempSync(join(dir, "pod-volume-"))
    writeFileSync(join(vol, "secret"), "s3cret\n", { mode: 0o600 })
    spawnSync("chown", ["-R", `${sandbox.uid}:${sandbox.uid}`, vol])
    const confined = await mapped(sandbox.id, "userns-pod", { security: {}, mounts: [{ hostPath: vol, containerPath: "/vol" }] })
    expect(confined.hostUid).toBe(sandbox.uid)
    expect(confined.rows).toContainEqual([sandbox.uid, sandbox.uid, 1])
    const read = await run(rt.containers.exec(confined.id, { command: ["sh", "-c", "id -u; cat /vol/secret; echo new >/vol/new && echo wrote"] }))
    expect(read.stdout).toBe(`${sandbox.uid}\ns3cret\nwrote\n`)
    // A second pod gets another range: no host id in common.
    const other = await run(rt.sandboxes.create(podSpec("userns-other")))
    try {
      const b = await mapped(other.id, "userns-b")
      const [, second] = b.rows[0]!
      expect(b.hostUid).toBe(second)
      expect(second >= first + 65536 || second + 65536 <= first, `${first} and ${second} overlap`).toBe(true)
      for (const c of [a, hostRoot, confined]) await run(rt.containers.remove(c.id))
    } finally {
      await run(rt.sandboxes.remove(other.id))
    }
  })

  it("refuses what it cannot run: unknown image or pinned digest, a second (name, attempt), a start twice", async () => {
    const base = { sandboxId: sandbox.id, attempt: 0, command: ["true"] }
    expect(await fail(rt.containers.create({ ...base, name: "a", image: "nothing:1" }))).toMatchObject({ _tag: "RuntimeNotFound", kind: "image" })
    expect(await fail(rt.containers.create({ ...base, name: "a", image: `busybox@sha256:${"0".repeat(64)}` }))).toMatchObject({
      _tag: "RuntimeNotFound",
      kind: "image"
    })
    expect((await fail(rt.containers.create({ ...base, name: "a" })))._tag).toBe("RuntimeInvalid")
    const pinned = await run(rt.containers.create({ ...base, name: "pinned", image: `busybox@${digest}` }))
    const dup = await fail(rt.containers.create({ ...base, name: "pinned", image: "busybox:test" }))
    expect(dup).toMatchObject({ _tag: "RuntimeAlreadyExists", id: pinned })
    await run(rt.containers.start(pinned))
    expect(await exited(pinned)).toMatchObject({ exitCode: 0, reason: "Completed" })
    expect((await fail(rt.containers.start(pinned)))._tag).toBe("RuntimeInvalid")
  })

  it("a second driver on the same data dir adopts the running container (once, same process, same log) and stops it", async () => {
    const secretEnv = `s3cr3t-${Math.random().toString(36).slice(2, 10)}`
    const id = await started("survivor", "i=0; while :; do echo beat-$i; i=$((i+1)); sleep 0.1; done", { env: { SECRET_ENV: secretEnv } })
    // Its record holds the environment only sealed (EnvSeal).
    const record = readFileSync(join(dataDir, "runc", "containers", id, "state.json"), "utf8")
    expect(record).toContain("kbox:env:aesgcm:v1:")
    expect(record).not.toContain(secretEnv)
    // runc's bundle config no longer holds it once the container runs.
    expect(readFileSync(join(dataDir, "runc", "containers", id, "bundle", "config.json"), "utf8")).not.toContain(secretEnv)
    const short = await started("short", "echo ready; sleep 0.5; exit 5")
    const hog = await started("hog-away", "echo ready; sleep 0.5; x=0123456789abcdef; while :; do x=$x$x; done", {
      resources: { memoryBytes: 32 * 1024 * 1024 }
    })
    const before = await run(rt.containers.inspect(id))
    await eventually(async () => (await lines(id)).length >= 2 || undefined, 10_000, "beats")
    handle.close()
    // While no driver watches, one keeps running and writing, two end: their ends are not lost.
    await eventually(() => processesWith(marks.at(-2)!).length + processesWith(marks.at(-1)!).length === 0 || undefined, 10_000, "short and hog-away to end")
    handle = RuncDriver.open({ dataDir })
    rt = handle.runtime
    const survivors = await run(rt.containers.list({ name: "survivor" }))
    expect(survivors.map((c) => c.id)).toEqual([id])
    expect(survivors[0]!.status).toEqual(before.status)
    // Their ends are known (runc's status and the OOM counter were kept for this driver to read).
    expect(await exited(short, 5_000)).toMatchObject({ exitCode: 5, reason: "Error" })
    expect(await exited(hog, 5_000)).toMatchObject({ exitCode: 137, reason: "OOMKilled" })
    expect(runcList().map((c) => c.id)).not.toContain(short)
    expect(runcList().filter((c) => c.id === id)).toEqual([expect.objectContaining({ status: "running" })])
    // The beats written while no driver ran are in the log, in order, without a gap.
    const beats = await eventually(async () => {
      const b = (await lines(id)).map((l) => /^beat-(\d+)\n$/.exec(l)?.[1]).filter((n) => n !== undefined).map(Number)
      return b.length >= 8 ? b : undefined
    }, 10_000, "beats after adoption")
    expect(beats).toEqual(beats.map((_, i) => i))
    expect((await run(rt.containers.exec(id, { command: ["echo", "adopted"] }))).stdout).toBe("adopted\n")
    // The adopting driver opened the sealed environment: an exec gets it.
    expect((await run(rt.containers.exec(id, { command: ["sh", "-c", "echo $SECRET_ENV"] }))).stdout).toBe(`${secretEnv}\n`)
    const status = await run(rt.containers.stop(id, { gracePeriodMs: 200 }))
    expect(status).toMatchObject({ state: "exited", exitCode: 137 })
    expect(runcList().filter((c) => c.id === id)).toEqual([])
  })

  it("works without overlayfs too (a copy of the image per container), and says clearly when runc is missing", async () => {
    const other = join(dir, "copy-data")
    expect(() => RuncDriver.open({ dataDir: other, runc: "/nonexistent/runc" })).toThrow(/runc not found/)
    // Without a user namespace too (the fallback where the kernel allows none): the host's ids.
    const copy = RuncDriver.open({ dataDir: other, rootfs: "copy", userns: "off" })
    try {
      const crt = copy.runtime
      await run(crt.images.import({ name: "busybox:test", path: busyboxTarball(dir) }))
      const sb = await run(crt.sandboxes.create(podSpec("copy")))
      const id = await run(crt.containers.create({ sandboxId: sb.id, name: "c", attempt: 0, image: "busybox:test", command: ["sleep", "30"] }))
      await run(crt.containers.start(id))
      expect((await run(crt.containers.exec(id, { command: ["sh", "-c", "touch /bin/written && ls /bin/written"] }))).stdout).toBe("/bin/written\n")
      expect(copy.userns).toMatchObject({ enabled: false })
      expect((await run(crt.containers.exec(id, { command: ["cat", "/proc/self/uid_map"] }))).stdout.trim().split(/\s+/)).toEqual(["0", "0", "4294967295"])
      const image = (await run(crt.images.list))[0]!
      expect(existsSync(join(other, "images", "sha256", image.digest.slice(7), "rootfs", "bin", "written"))).toBe(false)
      expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(other)
      await run(crt.sandboxes.remove(sb.id))
      expect(readdirSync(join(other, "runc", "containers"))).toEqual([])
    } finally {
      copy.close()
    }
  })

  it("leaves nothing behind: no runc container, process, mount or cgroup once the pod is removed", async () => {
    const id = await started("last", "sleep 30")
    const sb = sandbox.id
    await run(rt.sandboxes.remove(sb))
    expect(await fail(rt.containers.inspect(id))).toMatchObject({ _tag: "RuntimeNotFound" })
    expect(await run(rt.sandboxes.list())).toEqual([])
    expect(runcList()).toEqual([])
    for (const mark of marks) expect(processesWith(mark), mark).toEqual([])
    expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(dataDir)
    expect(readdirSync(join(dataDir, "runc", "containers"))).toEqual([])
    // The user-namespaced containers' rootfs mount points under /run are gone too.
    const roots = join("/run", `kbox-${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`)
    expect(existsSync(roots) ? readdirSync(roots) : []).toEqual([])
    const cgroups = (name: string) => spawnSync("find", ["/sys/fs/cgroup", "-type", "d", "-name", name], { encoding: "utf8" }).stdout.trim()
    expect(cgroups(sb)).toBe("")
    // Closed with nothing running, the box's own level goes too, in every hierarchy.
    handle.close()
    expect(cgroups(`kbox-${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`)).toBe("")
    expect(existsSync(roots)).toBe(false)
  })
})
