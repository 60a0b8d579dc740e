/**
 * Pods cannot see the node (issue 29): a real root box (isolated: pod namespaces), real
 * workloads. A container sent with `security` (as the agent always sends it) runs as its pod's
 * allocated uid or its runAsUser, with the capabilities it asked for, no_new_privs, and a mount
 * namespace where the box's data dir, its socket's directory and the `--hide` directories are
 * empty and root's alone, while its volumes from under them are still mounted.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { uidRange } from "../../src/box/Confinement.js"
import { type BoxProcess, type Client, connect, eventually, marker, podSpec, shSpec, startBox } from "./BoxProcess.js"

/** Everything a pod's process may try, one verdict a line ("name ok" or "name denied"). */
const probe = (paths: { kubeconfig: string; dataDir: string; socket: string; volumeHost: string }) => `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name ok"; else echo "$name denied"; fi; }
echo "uid $(id -u) gid $(id -g) groups $(id -G)"
grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status
try kubeconfig cat ${paths.kubeconfig}
try datadir ls ${paths.dataDir}/containers
try socket test -e ${paths.socket}
try volumehost cat ${paths.volumeHost}
try volume cat /mnt/kbox-vol/file
try hostview ls ${paths.dataDir}/.kbox-host
echo done
sleep 1000
`

const status = (log: string, field: string): string | undefined => new RegExp(`^${field}:\\s*(\\S+)$`, "m").exec(log)?.[1]

describe("koder-fleet box: pod confinement (root, isolated)", () => {
  let dir: string
  let box: BoxProcess
  let c: Client
  let sandbox: Runtime.Sandbox
  let paths: { kubeconfig: string; dataDir: string; socket: string; volumeHost: string }
  const volume = () => ({ hostPath: join(dir, "server", "agent", "pods", "p1", "vol"), containerPath: "/mnt/kbox-vol", readOnly: true })

  const start = async () => {
    // A bridge of its own for its pod-network sandbox (other suites use the default one).
    box = await startBox(["--data-dir", join(dir, "data"), "--socket", join(dir, "run", "box.sock"), "--hide", join(dir, "server"), "--bridge", "kbconf0"])
    c = await connect(box.socketPath)
  }

  beforeAll(async () => {
    // The tests need what CI has: root (uids to switch to, namespaces to make).
    if (process.env.CI === "true" || process.getuid?.() === 0) expect(process.getuid?.()).toBe(0)
    dir = mkdtempSync(join(tmpdir(), "kbox-confine-"))
    // A stand-in for the server's data dir: its kubeconfig, and a pod volume under the agent's dir.
    mkdirSync(join(dir, "server", "agent", "pods", "p1", "vol"), { recursive: true })
    writeFileSync(join(dir, "server", "kubeconfig"), "admin-token\n", { mode: 0o644 })
    writeFileSync(join(dir, "server", "agent", "pods", "p1", "vol", "file"), "volume content\n", { mode: 0o644 })
    paths = {
      kubeconfig: join(dir, "server", "kubeconfig"),
      dataDir: join(dir, "data"),
      socket: join(dir, "run", "box.sock"),
      volumeHost: join(dir, "server", "agent", "pods", "p1", "vol", "file")
    }
    await start()
    sandbox = await c.run(c.rt.sandboxes.create(podSpec("confined")))
  }, 120_000)

  afterAll(async () => {
    if (c) for (const s of await c.run(c.rt.sandboxes.list()).catch(() => [])) await c.run(c.rt.sandboxes.remove(s.id)).catch(() => undefined)
    await c?.close()
    await box?.stop()
    // The bridge outlives the box by design (pods keep their network); this suite's goes with it.
    spawnSync("ip", ["link", "del", "kbconf0"])
    rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const logOf = async (id: string) => Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id)))).map((l) => l.line).join("")

  /** Start a probe container and wait for its verdicts. */
  const runProbe = async (name: string, sandboxId: string, extra: Partial<Runtime.ContainerSpec>) => {
    const id = await c.run(c.rt.containers.create(shSpec(sandboxId, name, probe(paths), marker(name), { mounts: [volume()], ...extra })))
    await c.run(c.rt.containers.start(id))
    const log = await eventually(async () => {
      const text = await logOf(id)
      return text.includes("done\n") ? text : undefined
    }, 20_000, `the verdicts of ${name}`)
    return { id, log }
  }

  it("serves its socket 0600 in a 0700 directory, both root's", () => {
    const sock = statSync(paths.socket)
    const sockDir = statSync(join(dir, "run"))
    expect({ uid: sock.uid, mode: sock.mode & 0o777 }).toEqual({ uid: 0, mode: 0o600 })
    expect({ uid: sockDir.uid, mode: sockDir.mode & 0o777 }).toEqual({ uid: 0, mode: 0o700 })
  })

  it("runs a container without runAsUser as its pod's uid from the range, with no capabilities and no_new_privs, blind to the node", async () => {
    const { id, log } = await runProbe("default", sandbox.id, { security: {} })
    const uid = Number(/^uid (\d+) gid (\d+)/m.exec(log)?.[1])
    expect(uid).toBeGreaterThanOrEqual(uidRange.first)
    expect(uid).toBeLessThanOrEqual(uidRange.last)
    expect(log).toContain(`gid ${uid} groups ${uid}\n`)
    expect(status(log, "CapEff")).toBe("0000000000000000")
    expect(status(log, "CapBnd")).toBe("0000000000000000")
    expect(status(log, "NoNewPrivs")).toBe("1")
    // The node's files: hidden; its volume, from under a hidden directory: there.
    expect(log).toContain("kubeconfig denied\n")
    expect(log).toContain("datadir denied\n")
    expect(log).toContain("socket denied\n")
    expect(log).toContain("volumehost denied\n")
    expect(log).toContain("volume ok\n")
    expect(log).toContain("hostview denied\n")
    // An exec in it runs as the same uid, as confined.
    const r = await c.run(c.rt.containers.exec(id, { command: ["sh", "-c", "id -u; grep ^CapEff: /proc/self/status"] }))
    expect(r.stdout).toBe(`${uid}\nCapEff:\t0000000000000000\n`)
    // The same pod's next container gets the same uid; another pod another one.
    const again = await runProbe("again", sandbox.id, { security: {} })
    expect(again.log).toContain(`uid ${uid} `)
    const other = await c.run(c.rt.sandboxes.create(podSpec("confined-other")))
    const third = await runProbe("other", other.id, { security: {} })
    const otherUid = Number(/^uid (\d+)/m.exec(third.log)?.[1])
    expect(otherUid).not.toBe(uid)
    expect(otherUid).toBeGreaterThanOrEqual(uidRange.first)
    // A restarted box keeps each pod's uid (its record), so re-adopted pods and new containers agree.
    await c.close()
    await box.stop()
    await start()
    const after = await runProbe("after-restart", sandbox.id, { security: {} })
    expect(after.log).toContain(`uid ${uid} `)
    // A restart of the box on a loaded machine takes a while: the test's own time, not the pods'.
  }, 150_000)

  it("honours runAsUser, runAsGroup, supplementary groups and added capabilities", async () => {
    const { log } = await runProbe("asked", sandbox.id, {
      user: { uid: 1234, gid: 2345, supplementalGroups: [3456] },
      security: { capabilities: { add: ["NET_BIND_SERVICE"], drop: ["CHOWN"] }, allowPrivilegeEscalation: false }
    })
    expect(log).toContain("uid 1234 gid 2345 groups 2345 3456\n")
    // CAP_NET_BIND_SERVICE is bit 10.
    expect(status(log, "CapEff")).toBe("0000000000000400")
    expect(status(log, "CapAmb")).toBe("0000000000000400")
    expect(status(log, "NoNewPrivs")).toBe("1")
    expect(log).toContain("kubeconfig denied\n")
  })

  it("gives root the runtimes' default capabilities (not all), minus what it drops; privileged keeps them all", async () => {
    const root = await runProbe("root", sandbox.id, { user: { uid: 0 }, security: {} })
    const eff = BigInt(`0x${status(root.log, "CapEff")}`)
    const all = BigInt(`0x${status((await runProbe("privileged", sandbox.id, { user: { uid: 0 }, security: { privileged: true } })).log, "CapEff")}`)
    // CAP_SYS_ADMIN (21) is not in the default set; CAP_CHOWN (0) is.
    expect(eff & (1n << 21n)).toBe(0n)
    expect(eff & 1n).toBe(1n)
    expect(all & (1n << 21n)).toBe(1n << 21n)
    const dropped = await runProbe("root-drop", sandbox.id, { user: { uid: 0 }, security: { capabilities: { drop: ["ALL"] } } })
    expect(status(dropped.log, "CapEff")).toBe("0000000000000000")
    // Root without CAP_DAC_OVERRIDE cannot enter the covers' view of what they hide (mode 0000);
    // root with the default set can (docs/box.md: root pods are trusted on the process driver).
    expect(dropped.log).toContain("hostview denied\n")
    expect(root.log).toContain("hostview ok\n")
    // Root too (which the modes of the temporary directories would not stop) finds the node's
    // directories covered: the socket's, the data dir, the hidden server dir, yet its volume there.
    expect(root.log).toContain("socket denied\n")
    expect(root.log).toContain("datadir denied\n")
    expect(root.log).toContain("kubeconfig denied\n")
    expect(root.log).toContain("volumehost denied\n")
    expect(root.log).toContain("volume ok\n")
  })

  it("lets a pod with its own network namespace listen on a port below 1024 without being root", async () => {
    const podNet = await c.run(c.rt.sandboxes.create({ ...podSpec("confined-net"), network: "pod", podCidr: "10.231.7.0/24" }))
    const server = "require('node:net').createServer().listen(80, () => console.log('listening on 80 as ' + process.getuid()))"
    const id = await c.run(c.rt.containers.create({ sandboxId: podNet.id, name: "web", attempt: 0, command: [process.execPath, "-e", server], security: {} }))
    await c.run(c.rt.containers.start(id))
    const log = await eventually(async () => {
      const text = await logOf(id)
      return text.includes("listening on 80") ? text : undefined
    }, 20_000, "the server on port 80")
    expect(Number(/as (\d+)/.exec(log)?.[1])).toBeGreaterThanOrEqual(uidRange.first)
  })

  it("refuses runAsNonRoot as uid 0, and unknown capabilities, when the container is created", async () => {
    const e = await c.fail(c.rt.containers.create(shSpec(sandbox.id, "nonroot", "true", marker("nr"), { user: { uid: 0 }, security: { runAsNonRoot: true } })))
    expect(e).toMatchObject({ _tag: "RuntimeInvalid", message: "container has runAsNonRoot and image will run as root" })
    const bad = await c.fail(c.rt.containers.create(shSpec(sandbox.id, "badcap", "true", marker("bc"), { security: { capabilities: { add: ["FLY"] } } })))
    expect(bad).toMatchObject({ _tag: "RuntimeInvalid" })
    expect((bad as { message: string }).message).toContain('unknown capability "FLY"')
  })

  it("readOnlyRootFilesystem: the root is read-only for the container, its volumes keep their modes", async () => {
    const target = `/kbox-ro-${Math.random().toString(36).slice(2, 8)}`
    const rw = join(dir, "rw")
    mkdirSync(rw, { mode: 0o777 })
    const script = `if touch ${target} 2>/dev/null; then echo root-writable; rm -f ${target}; else echo root-readonly; fi
if touch /mnt/rw/x; then echo volume-writable; fi
echo done; sleep 1000`
    const id = await c.run(
      c.rt.containers.create(
        shSpec(sandbox.id, "ro", script, marker("ro"), {
          user: { uid: 0 },
          security: { readOnlyRootFilesystem: true },
          mounts: [{ hostPath: rw, containerPath: "/mnt/rw" }]
        })
      )
    )
    await c.run(c.rt.containers.start(id))
    const log = await eventually(async () => ((await logOf(id)).includes("done\n") ? logOf(id) : undefined), 20_000, "the ro verdicts")
    expect(log).toContain("root-readonly\n")
    expect(log).toContain("volume-writable\n")
    expect(statSync(join(rw, "x")).isFile()).toBe(true)
  })
})
