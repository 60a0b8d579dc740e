/**
 * The `koder-fleet box` suite with the process driver: a real box process, a real socket, real
 * workloads, driven through kbox-client. Box.test.ts runs it isolated (root: pod namespaces and
 * cgroups), BoxPlain.test.ts plain (`--isolation none --cgroups none`: what an unprivileged box does),
 * both with the native shim where the machine can build it; BoxShellChain.test.ts runs it isolated
 * with the sh chain (`--shim sh`), what a box without a C compiler uses.
 */
import { type Runtime, StreamSession } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { which } from "../../src/box/Tools.js"
import {
  alive,
  type BoxProcess,
  type Client,
  connect,
  eventually,
  holderOf,
  isShim,
  marker,
  podSpec,
  processesWith,
  shSpec,
  startBox
} from "./BoxProcess.js"

/** The suite, run by Box.test.ts (isolated), BoxPlain.test.ts (plain) and BoxShellChain.test.ts. */
export const suite = (isolation: "isolated" | "plain", args: ReadonlyArray<string>, shim: "auto" | "sh" = "auto") => {
// Names of pods and markers: suites run side by side, and look for their processes by name.
const mode = shim === "sh" ? `${isolation}-sh` : isolation
describe(`koder-fleet box (${mode})`, () => {
  let dir: string
  let box: BoxProcess
  let c: Client
  let sandbox: Runtime.Sandbox
  const isolated = isolation === "isolated"
  // The native shim, unless the suite asks for the sh chain or the machine cannot build it.
  const native = shim === "auto" && ["cc", "gcc", "clang"].some((cc) => which(cc) !== undefined)

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-"))
    box = await startBox([
      "--data-dir",
      join(dir, "data"),
      "--socket",
      join(dir, "box.sock"),
      "--log-max-size",
      String(64 * 1024),
      "--log-max-files",
      "1",
      ...(shim === "sh" ? ["--shim", "sh"] : []),
      ...args
    ])
    c = await connect(box.socketPath)
    sandbox = await c.run(c.rt.sandboxes.create(podSpec(`web-${mode}`)))
  })

  afterAll(async () => {
    // Containers outlive the box by design: remove every pod this suite made, whatever failed.
    if (c) for (const s of await c.run(c.rt.sandboxes.list()).catch(() => [])) await c.run(c.rt.sandboxes.remove(s.id)).catch(() => undefined)
    await c?.close()
    await box?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Create and start a shell-script container; returns its id. */
  const run = async (name: string, script: string, mark: string, extra: Partial<Runtime.ContainerSpec> = {}) => {
    const id = await c.run(c.rt.containers.create(shSpec(sandbox.id, name, script, mark, extra)))
    await c.run(c.rt.containers.start(id))
    return id
  }

  const exited = (id: string, ms = 10_000) =>
    eventually(async () => {
      const ctr = await c.run(c.rt.containers.inspect(id))
      return ctr.status.state === "exited" ? ctr.status : undefined
    }, ms, `container ${id} to exit`)

  /** Wait for a line in the container's log. */
  const logged = (id: string, text: string) =>
    eventually(async () => {
      const lines = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id))))
      return lines.some((l) => l.line === `${text}\n`) || undefined
    }, 10_000, `"${text}" in the log of ${id}`)

  it("serves the socket with mode 0600 and reports its capabilities", async () => {
    const info = await c.run(c.rt.info)
    expect(info).toMatchObject({ name: "koder-fleet-box", driver: "process" })
    expect(info.capabilities.isolation).toBe(isolated ? "namespaces" : "none")
    expect(info.capabilities.cgroups).toBe(isolated ? "v1" : "none")
    expect(info.capabilities.limits.memory).toBe(isolated)
    expect(statSync(box.socketPath).mode & 0o777).toBe(0o600)
  })

  it("starts containers with the native shim where it can build one, else the sh chain, and says which", () => {
    expect(box.stdout()).toContain(native ? "shim native," : "shim sh")
  })

  it("the main process is the shim's own child (native) and the shim does not pose as its workload", async () => {
    const mark = marker("parent")
    const id = await run("parent", "echo ready; while :; do sleep 1; done", mark)
    await logged(id, "ready")
    const pid = (await c.run(c.rt.containers.inspect(id))).status.pid!
    const parent = Number(/\) \S+ (\d+) /.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))![1])
    // The sh chain into a pod puts nsenter between them (it carries the workload's command line
    // too); the native shim joins the pod's pid namespace for its children only. Plain, both
    // chains exec down to the workload.
    const direct = native || !isolated
    expect(isShim(parent), readFileSync(`/proc/${parent}/cmdline`, "utf8")).toBe(direct)
    // The native shim's command line names its launch file, not the workload's command: a scan of
    // /proc finds that command once.
    if (direct) expect(processesWith(mark)).toEqual([pid])
    await c.run(c.rt.containers.remove(id))
  })

  it("runs a container: running with a live host pid, then its exit code, reason and times", async () => {
    const mark = marker("exit")
    const id = await run("exit7", "echo started; sleep 0.4; exit 7", mark)
    const running = await c.run(c.rt.containers.inspect(id))
    expect(running.status.state).toBe("running")
    expect(alive(running.status.pid!)).toBe(true)
    const status = await exited(id)
    expect(status).toMatchObject({ state: "exited", exitCode: 7, reason: "Error" })
    expect(Date.parse(status.finishedAt!) - Date.parse(status.startedAt!)).toBeGreaterThanOrEqual(300)
    const ok = await run("exit0", "true", marker("exit0"))
    expect(await exited(ok)).toMatchObject({ exitCode: 0, reason: "Completed" })
    expect(processesWith(mark)).toEqual([])
  })

  it("stop: a process that handles SIGTERM ends with its own code, well before the grace period", async () => {
    const id = await run("graceful", "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done", marker("term"))
    await logged(id, "ready")
    const t0 = Date.now()
    const status = await c.run(c.rt.containers.stop(id, { gracePeriodMs: 10_000 }))
    expect(Date.now() - t0).toBeLessThan(3_000)
    expect(status).toMatchObject({ state: "exited", exitCode: 0, reason: "Completed" })
    await logged(id, "bye")
  })

  it("stop: SIGTERM ignored → SIGKILL of the whole container when the grace period ends", async () => {
    const mark = marker("stubborn")
    const id = await run("stubborn", "trap '' TERM; sh -c 'trap \"\" TERM; sleep 1000' $0-child & echo ready; while :; do sleep 0.05; done", mark)
    await logged(id, "ready")
    const t0 = Date.now()
    const status = await c.run(c.rt.containers.stop(id, { gracePeriodMs: 1_000 }))
    const took = Date.now() - t0
    expect(took).toBeGreaterThanOrEqual(1_000)
    expect(took).toBeLessThan(5_000)
    expect(status).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL", reason: "Error" })
    expect(processesWith(mark)).toEqual([])
    // Stop is idempotent.
    expect((await c.run(c.rt.containers.stop(id, { gracePeriodMs: 1_000 }))).exitCode).toBe(137)
  })

  it("signal: delivers SIGHUP to the main process; SIGKILL ends it; an exited container refuses", async () => {
    const id = await run("hup", "trap 'echo got-hup' HUP; echo ready; while :; do sleep 0.05; done", marker("hup"))
    await logged(id, "ready")
    await c.run(c.rt.containers.signal(id, "HUP"))
    await logged(id, "got-hup")
    expect((await c.run(c.rt.containers.inspect(id))).status.state).toBe("running")
    await c.run(c.rt.containers.signal(id, "9"))
    expect(await exited(id)).toMatchObject({ exitCode: 137, signal: "SIGKILL" })
    expect((await c.fail(c.rt.containers.signal(id, "SIGTERM")))._tag).toBe("RuntimeInvalid")
  })

  it("signal: SIGINT and SIGQUIT reach the workload (the shim's background forks do not leave them ignored)", async () => {
    const id = await run("int", "trap 'echo got-int' INT; trap 'echo got-quit' QUIT; echo ready; while :; do sleep 0.05; done", marker("int"))
    await logged(id, "ready")
    const pid = (await c.run(c.rt.containers.inspect(id))).status.pid!
    const ignored = BigInt(`0x${/^SigIgn:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]}`)
    expect(ignored & ((1n << 1n) | (1n << 2n))).toBe(0n)
    await c.run(c.rt.containers.signal(id, "INT"))
    await logged(id, "got-int")
    await c.run(c.rt.containers.signal(id, "SIGQUIT"))
    await logged(id, "got-quit")
  })

  it("exec: output, exit code, env, working directory and stdin of a command in the container's context", async () => {
    const id = await run("exec", "echo ready; sleep 1000", marker("exec"), { env: { FOO: "bar" }, workingDir: "/tmp" })
    const r = await c.run(
      c.rt.containers.exec(id, { command: ["sh", "-c", "echo out; echo err >&2; pwd; echo $FOO $EXTRA; exit 3"], env: { EXTRA: "x" } })
    )
    expect(r).toEqual({ exitCode: 3, stdout: "out\n/tmp\nbar x\n", stderr: "err\n", timedOut: false })
    expect((await c.run(c.rt.containers.exec(id, { command: ["cat"], stdin: "hello" }))).stdout).toBe("hello")
    const host = await c.run(c.rt.containers.exec(id, { command: ["cat", "/proc/sys/kernel/hostname"] }))
    if (isolated) {
      // Inside the pod's namespaces: its hostname, and a pid namespace where the holder is pid 1.
      expect(host.stdout.trim()).toBe(`web-${mode}`)
      const pid1 = await c.run(c.rt.containers.exec(id, { command: ["cat", "/proc/1/cmdline"] }))
      expect(pid1.stdout).toContain("holder")
    }
    const missing = await c.run(c.rt.containers.exec(id, { command: ["no-such-command-kbox"] }))
    expect(missing.exitCode).toBe(126)
    expect(missing.stderr).toContain("no-such-command-kbox")
  })

  it("streaming exec on a TTY: a terminal of the size asked for, resized live, TERM set; closing the session kills the command", async () => {
    const id = await run("exec-tty", "echo ready; sleep 1000", marker("exec-tty"))
    const session = await c.run(c.rt.containers.execStream(id, { command: ["sh", "-c", 'test -t 0 && echo is-a-tty; echo "term=$TERM"; read go; echo "read:$go"; while :; do stty size; sleep 0.1; done'], stdin: true, tty: true }))
    const decoder = new TextDecoder()
    let text = ""
    const frames = session.frames[Symbol.asyncIterator]()
    const until = async (pattern: RegExp) => {
      const deadline = Date.now() + 10_000
      while (!pattern.test(text)) {
        if (Date.now() > deadline) throw new Error(`no ${String(pattern)} in ${JSON.stringify(text)}`)
        const next = await frames.next()
        if (next.done === true) throw new Error(`ended before ${String(pattern)}: ${JSON.stringify(text)}`)
        if (next.value.channel === StreamSession.Channel.stdout) text += decoder.decode(next.value.data)
      }
    }
    session.send(StreamSession.resize(100, 30))
    await until(/term=xterm/)
    expect(text).toContain("is-a-tty")
    session.send(StreamSession.text(StreamSession.Channel.stdin, "go\r"))
    await until(/read:go/)
    await until(/30 100/)
    session.send(StreamSession.resize(132, 43))
    await until(/43 132/)
    const mark = marker("exec-stream-kill")
    const long = await c.run(c.rt.containers.execStream(id, { command: ["sh", "-c", "sleep 1000", mark], stdin: false, tty: false }))
    await eventually(async () => (processesWith(mark).length > 0 ? true : undefined))
    long.close()
    await eventually(async () => (processesWith(mark).length === 0 ? true : undefined))
  })

  it("exec: a command over its timeout is killed and reported as timed out", async () => {
    const id = await run("exec-timeout", "sleep 1000", marker("exec-timeout"))
    const mark = marker("exec-child")
    const t0 = Date.now()
    const r = await c.run(c.rt.containers.exec(id, { command: ["sh", "-c", "sleep 1000", mark], timeoutMs: 300 }))
    expect(Date.now() - t0).toBeLessThan(3_000)
    expect(r).toMatchObject({ timedOut: true, exitCode: 137 })
    expect(processesWith(mark)).toEqual([])
    expect((await c.run(c.rt.containers.inspect(id))).status.state).toBe("running")
  })

  it("logs: follow streams live output, ends when the container exits; tailLines, timestamps, stderr", async () => {
    const id = await run(
      "ticker",
      "echo to-stderr >&2; i=0; while [ $i -lt 8 ]; do echo tick-$i; i=$((i+1)); sleep 0.15; done",
      marker("ticker")
    )
    // Followed from the start, the stream delivers every line and ends when the container exits.
    const followed = await c.run(Stream.runCollect(c.rt.containers.logs(id, { follow: true, timestamps: true })))
    const lines = Chunk.toArray(followed)
    expect(lines.filter((l) => l.stream === "stdout").map((l) => l.line)).toEqual(
      Array.from({ length: 8 }, (_, i) => `tick-${i}\n`)
    )
    expect(lines.find((l) => l.stream === "stderr")?.line).toBe("to-stderr\n")
    for (const l of lines) expect(Number.isNaN(Date.parse(l.timestamp!))).toBe(false)
    // The stream ended with the container (runCollect returned), and the lines came over time.
    const stamps = lines.filter((l) => l.stream === "stdout").map((l) => Date.parse(l.timestamp!))
    expect(stamps[7]! - stamps[0]!).toBeGreaterThanOrEqual(700)
    expect((await c.run(c.rt.containers.inspect(id))).status.state).toBe("exited")
    const tail = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id, { tailLines: 2 }))))
    expect(tail).toEqual([
      { stream: "stdout", line: "tick-6\n" },
      { stream: "stdout", line: "tick-7\n" }
    ])
  })

  it("logs: a follower sees lines while they are written, not after the exit", async () => {
    const id = await run("live", "i=0; while :; do echo live-$i; i=$((i+1)); sleep 0.1; done", marker("live"))
    const t0 = Date.now()
    const first3 = Chunk.toArray(await c.run(Stream.runCollect(Stream.take(c.rt.containers.logs(id, { follow: true }), 3))))
    expect(first3.map((l) => l.line)).toEqual(["live-0\n", "live-1\n", "live-2\n"])
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect((await c.run(c.rt.containers.inspect(id))).status.state).toBe("running")
    const after = Chunk.toArray(await c.run(Stream.runCollect(Stream.take(c.rt.containers.logs(id, { follow: true, tailLines: 0 }), 2))))
    const n = (l: { line: string }) => Number(l.line.trim().split("-")[1])
    expect(n(after[1]!)).toBe(n(after[0]!) + 1)
    expect(n(after[0]!)).toBeGreaterThanOrEqual(3)
    await c.run(c.rt.containers.remove(id))
  })

  it("rotates a container's log by size, keeping the newest lines in order", async () => {
    // The suite's box keeps 64 KiB per file and one rotated file.
    const id = await run(
      "chatty",
      "i=0; while [ $i -lt 3000 ]; do echo line-$i-padding-padding-padding-padding; i=$((i+1)); done; echo end",
      marker("chatty")
    )
    await exited(id)
    const files = readdirSync(join(dir, "data", "containers", id)).filter((f) => f.startsWith("container.log")).sort()
    expect(files).toEqual(["container.log", "container.log.1"])
    for (const f of files) expect(statSync(join(dir, "data", "containers", id, f)).size).toBeLessThanOrEqual(64 * 1024)
    const lines = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id)))).map((l) => l.line)
    expect(lines.at(-1)).toBe("end\n")
    const numbers = lines.slice(0, -1).map((l) => Number(/^line-(\d+)-/.exec(l)![1]))
    expect(numbers.at(-1)).toBe(2999)
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => 3000 - numbers.length + i))
    const tail = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id, { tailLines: 2 })))).map((l) => l.line)
    expect(tail).toEqual(["line-2999-padding-padding-padding-padding\n", "end\n"])
  })

  it("keeps the shim's files (FIFOs, pid, exit) in the box's run directory in memory and the record and log on disk; removal takes both", async () => {
    const runDir = join("/dev/shm", `kbox-${process.getuid?.() ?? 0}-${createHash("sha256").update(join(dir, "data")).digest("hex").slice(0, 12)}`)
    const id = await run("files", "echo hello; exit 3", marker("files"))
    expect((await exited(id)).exitCode).toBe(3)
    await logged(id, "hello")
    expect(readdirSync(join(runDir, id)).sort()).toEqual(["exit", "pid", "start-error", "stderr.fifo", "stdout.fifo"])
    expect(statSync(runDir).mode & 0o777).toBe(0o700)
    expect(readdirSync(join(dir, "data", "containers", id)).sort()).toEqual(["container.log", "state.json"])
    await c.run(c.rt.containers.remove(id))
    expect(existsSync(join(runDir, id))).toBe(false)
    expect(existsSync(join(dir, "data", "containers", id))).toBe(false)
  })

  it("starts a container whose PATH has none of the host's tools (the shim uses absolute paths)", async () => {
    const id = await c.run(
      c.rt.containers.create({
        sandboxId: sandbox.id,
        name: "bare-path",
        attempt: 0,
        command: ["/bin/sh", "-c", "echo path=$PATH"],
        env: { PATH: "/opt/nothing-here" }
      })
    )
    await c.run(c.rt.containers.start(id))
    expect(await exited(id)).toMatchObject({ exitCode: 0 })
    await logged(id, "path=/opt/nothing-here")
  })

  it("runs the workload in its working directory, finds its command there or on its own PATH, and passes every variable as given", async () => {
    const wd = mkdtempSync(join(tmpdir(), "kbox-wd-"))
    try {
      writeFileSync(join(wd, "run.sh"), '#!/bin/sh\necho "pwd=$(pwd)"\n', { mode: 0o755 })
      const start = async (name: string, spec: Partial<Runtime.ContainerSpec>) => {
        const id = await c.run(c.rt.containers.create({ sandboxId: sandbox.id, name, attempt: 0, command: ["./run.sh"], ...spec }))
        await c.run(c.rt.containers.start(id))
        expect(await exited(id)).toMatchObject({ exitCode: 0 })
        return id
      }
      await logged(await start("wd-relative", { workingDir: wd }), `pwd=${wd}`)
      await logged(await start("wd-path", { command: ["run.sh"], workingDir: "/tmp", env: { PATH: `/no/such/dir:${wd}` } }), "pwd=/tmp")
      // Names the shim could clash with (it runs in the shell that exports them), and one sh cannot export.
      const env = await start("env", { command: ["env"], env: { d: "mine", token: "tok", self: "me", f: "eff", "my.var": "odd" } })
      for (const line of ["d=mine", "token=tok", "self=me", "f=eff", "my.var=odd"]) await logged(env, line)
    } finally {
      rmSync(wd, { recursive: true, force: true })
    }
  })

  it("a command that cannot start is a StartError, not an ordinary exit", async () => {
    const id = await c.run(
      c.rt.containers.create({ sandboxId: sandbox.id, name: "missing", attempt: 0, command: ["no-such-command-kbox"] })
    )
    await c.run(c.rt.containers.start(id))
    const status = await exited(id)
    expect(status).toMatchObject({ exitCode: 128, reason: "StartError" })
    expect(status.message).toContain("no-such-command-kbox")
    const wd = await run("bad-wd", "true", marker("bad-wd"), { workingDir: "/no/such/dir" })
    expect(await exited(wd)).toMatchObject({ reason: "StartError" })
    expect((await c.fail(c.rt.containers.start(id)))._tag).toBe("RuntimeInvalid")
  })

  it("a script without #! runs under sh; one whose interpreter is missing cannot start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kbox-scripts-"))
    try {
      writeFileSync(join(dir, "plain"), "echo plain-script-ran\n", { mode: 0o755 })
      writeFileSync(join(dir, "orphaned"), "#!/no/such/interpreter\necho never\n", { mode: 0o755 })
      const start = async (name: string, command: string) => {
        const id = await c.run(c.rt.containers.create({ sandboxId: sandbox.id, name, attempt: 0, command: [command] }))
        await c.run(c.rt.containers.start(id))
        return id
      }
      const plain = await start("no-shebang", join(dir, "plain"))
      await logged(plain, "plain-script-ran")
      expect(await exited(plain)).toMatchObject({ exitCode: 0, reason: "Completed" })
      const orphaned = await exited(await start("no-interpreter", join(dir, "orphaned")))
      // The native shim sees execve fail; the sh chain's last exec fails inside sh (127).
      if (native) expect(orphaned).toMatchObject({ exitCode: 128, reason: "StartError", message: expect.stringContaining("no such file or directory") })
      else expect(orphaned.exitCode).toBe(127)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("removing a container kills its whole process tree, even a child that started its own session", async () => {
    const mark = marker("tree")
    const id = await run(
      "tree",
      "sh -c 'sleep 1000' $0-a & setsid sh -c 'sleep 1000' $0-b & echo ready; wait",
      mark
    )
    await logged(id, "ready")
    await eventually(() => processesWith(`${mark}-b`).length > 0 || undefined, 5_000, "the setsid child")
    const pids = (await c.run(c.rt.containers.processes(id))).map((p) => p.pid)
    // Everything with the marker but the shim (the supervisor outside the container) is in it.
    const marked = processesWith(mark)
    const workload = marked.filter((pid) => !isShim(pid))
    expect(workload.length).toBeGreaterThanOrEqual(3)
    for (const pid of workload) expect(pids).toContain(pid)
    await c.run(c.rt.containers.remove(id))
    for (const pid of [...pids, ...marked]) expect(alive(pid), `pid ${pid}`).toBe(false)
    expect((await c.fail(c.rt.containers.inspect(id)))._tag).toBe("RuntimeNotFound")
    await c.run(c.rt.containers.remove(id))
  })

  it("when the main process exits, what it left running is killed with it", async () => {
    const mark = marker("leftover")
    const id = await run("leftover", "sh -c 'sleep 1000' $0-child & echo ready; sleep 0.3; exit 0", mark)
    expect(await exited(id)).toMatchObject({ exitCode: 0 })
    expect(processesWith(mark)).toEqual([])
  })

  it("stats and processes of a running container", async () => {
    const id = await run("busy", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done; sleep 1000", marker("busy"))
    await logged(id, "done")
    const stats = await c.run(c.rt.containers.stats(id))
    expect(stats.cpu.usageCoreNanoSeconds).toBeGreaterThan(10_000_000)
    expect(stats.memory.workingSetBytes).toBeGreaterThan(0)
    expect(stats.pids).toBeGreaterThanOrEqual(1)
    const procs = await c.run(c.rt.containers.processes(id))
    const main = (await c.run(c.rt.containers.inspect(id))).status.pid!
    expect(procs.find((p) => p.pid === main)).toMatchObject({ command: "sh" })
    expect(procs.some((p) => p.command === "sleep")).toBe(true)
  })

  it("runs as the requested user", async () => {
    const id = await run("nobody", "id -u; id -g; sleep 1000", marker("user"), { user: { uid: 65534, gid: 65534 } })
    await logged(id, "65534")
    const r = await c.run(c.rt.containers.exec(id, { command: ["id", "-u"] }))
    expect(r.stdout.trim()).toBe("65534")
  })

  it("refuses a second container for the same (sandbox, name, attempt) and a second sandbox per pod", async () => {
    const spec = shSpec(sandbox.id, "once", "sleep 1000", marker("once"))
    const id = await c.run(c.rt.containers.create(spec))
    expect(await c.fail(c.rt.containers.create(spec))).toMatchObject({ _tag: "RuntimeAlreadyExists", id })
    const next = await c.run(c.rt.containers.create({ ...spec, attempt: 1 }))
    expect(next).not.toBe(id)
    expect(await c.fail(c.rt.sandboxes.create(sandbox.spec))).toMatchObject({ _tag: "RuntimeAlreadyExists", id: sandbox.id })
    expect((await c.fail(c.rt.containers.inspect("nope")))._tag).toBe("RuntimeNotFound")
    expect((await c.fail(Stream.runCollect(c.rt.containers.logs("nope"))))._tag).toBe("RuntimeNotFound")
    expect((await c.fail(c.rt.containers.create({ ...spec, sandboxId: "nope" })))._tag).toBe("RuntimeNotFound")
  })

  it("lists containers and sandboxes by labels and state", async () => {
    const labels = { "fleet.koder.dev/pod-uid": sandbox.spec.podUid, tier: `t-${mode}` }
    const a = await run("labelled", "sleep 1000", marker("lab"), { labels })
    const found = await c.run(c.rt.containers.list({ labels: { tier: `t-${mode}` } }))
    expect(found.map((x) => x.id)).toEqual([a])
    expect((await c.run(c.rt.containers.list({ sandboxId: sandbox.id, state: "running", name: "labelled" }))).map((x) => x.id)).toEqual([a])
    expect((await c.run(c.rt.sandboxes.list({ podUid: sandbox.spec.podUid }))).map((s) => s.id)).toEqual([sandbox.id])
  })

  // Only an isolated pod has a mount namespace of its own to bind into.
  if (isolated) it("bind-mounts host paths at their container paths, read-only when asked", async () => {
    const host = join(dir, "vol")
    mkdirSync(host)
    writeFileSync(join(host, "greeting"), "hi from the host\n")
    const target = `/mnt/kbox-test-${Math.random().toString(36).slice(2, 8)}`
    const id = await run("mounted", `cat ${target}/greeting; touch ${target}/x 2>/dev/null || echo read-only; sleep 1000`, marker("mnt"), {
      mounts: [{ hostPath: host, containerPath: target, readOnly: true }]
    })
    await logged(id, "hi from the host")
    await logged(id, "read-only")
    await c.run(c.rt.containers.remove(id))
    rmSync(target, { recursive: true, force: true })
  })

  if (isolated) it("the pod's holder is pid 1 of the pod; natively the launcher's own child, no process waiting on it", async () => {
    const mark = marker("holder")
    const id = await run("holder", "echo ready; sleep 1000", mark)
    await logged(id, "ready")
    const holder = holderOf((await c.run(c.rt.containers.inspect(id))).status.pid!)
    expect(holder).toBeDefined()
    const ppid = Number(/\) \S+ (\d+) /.exec(readFileSync(`/proc/${holder}/stat`, "utf8"))![1])
    const parent = readFileSync(`/proc/${ppid}/cmdline`, "utf8").split("\0")
    // With the sh chain, `unshare --fork` made the namespaces and waits on the holder.
    if (native) expect(parent.slice(1, 2), parent.join(" ")).toEqual(["launcher"])
    else expect(parent[0]).toMatch(/unshare$/)
    expect(readFileSync(`/proc/${holder}/cmdline`, "utf8")).toContain("holder")
    await c.run(c.rt.containers.remove(id))
  })

  if (isolated) it("the pod's holder reaps the orphans its containers leave behind", async () => {
    const mark = marker("orphan")
    const id = await run("orphan", `(sh -c 'sleep 0.2; exit 0' "$0-child" &); echo ready; sleep 1000`, mark)
    await eventually(async () => (processesWith(`${mark}-child`).length === 0 ? true : undefined), 10_000, "the orphan to end")
    const holder = holderOf((await c.run(c.rt.containers.inspect(id))).status.pid!)
    expect(holder).toBeDefined()
    const holders = new Set([holder])
    // Ended and reaped: no zombie is left with a holder as its parent.
    const zombies = () =>
      readdirSync("/proc").filter((name) => {
        if (!/^\d+$/.test(name)) return false
        try {
          const stat = readFileSync(`/proc/${name}/stat`, "utf8")
          const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
          return state === "Z" && holders.has(Number(ppid))
        } catch {
          return false
        }
      })
    await eventually(async () => (zombies().length === 0 ? true : undefined), 5_000, "the holder to reap the orphan")
  })

  it("removing a sandbox removes its containers and, isolated, its namespaces' holder", async () => {
    const pod = podSpec(marker(`gone-${mode}`))
    const sb = await c.run(c.rt.sandboxes.create(pod))
    const mark = marker("sbgone")
    const id = await c.run(c.rt.containers.create(shSpec(sb.id, "x", "sleep 1000", mark)))
    await c.run(c.rt.containers.start(id))
    const holder = holderOf((await c.run(c.rt.containers.inspect(id))).status.pid!)
    if (isolated) expect(holder).toBeDefined()
    else expect(holder).toBeUndefined()
    await c.run(c.rt.sandboxes.remove(sb.id))
    expect(processesWith(mark)).toEqual([])
    if (holder !== undefined) expect(alive(holder)).toBe(false)
    expect((await c.fail(c.rt.containers.inspect(id)))._tag).toBe("RuntimeNotFound")
    expect((await c.fail(c.rt.sandboxes.get(sb.id)))._tag).toBe("RuntimeNotFound")
  })
})
}
