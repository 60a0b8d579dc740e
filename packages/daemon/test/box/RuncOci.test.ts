/**
 * The runc driver's pure parts: the OCI config a container spec becomes, what runc's log says
 * went wrong, and where runc puts a relative cgroup path in each hierarchy.
 */
import type { Runtime } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"
import { Either } from "effect"
import * as Confinement from "../../src/box/Confinement.js"
import * as Oci from "../../src/box/Oci.js"
import { hierarchyDirs, lastRuncError } from "../../src/box/RuncDriver.js"
import * as UserNamespace from "../../src/box/UserNamespace.js"

const spec = (extra: Partial<Runtime.ContainerSpec> = {}): Runtime.ContainerSpec => ({
  sandboxId: "sb",
  name: "app",
  attempt: 0,
  image: "busybox:1",
  command: ["sh", "-c"],
  args: ["echo hi"],
  ...extra
})

const input = (extra: Partial<Oci.Input> = {}): Oci.Input => ({
  spec: spec(),
  rootfs: "/data/runc/containers/c1/bundle/rootfs",
  cgroupsPath: "kbox-abc/sb/c1",
  swapLimit: true,
  ...extra
})

describe("Oci.resources", () => {
  it.each<[string, Runtime.Resources | undefined, boolean, Record<string, unknown>]>([
    ["nothing: only the default device rule", undefined, true, {}],
    ["memory with swap held at the limit", { memoryBytes: 33554432 }, true, { memory: { limit: 33554432, swap: 33554432 } }],
    ["memory where swap cannot be limited", { memoryBytes: 33554432.7 }, false, { memory: { limit: 33554432 } }],
    ["cpu limit as a CFS quota per 100 ms", { cpuMillis: 250 }, true, { cpu: { period: 100000, quota: 25000 } }],
    ["a tiny cpu limit is held to runc's 1 ms minimum", { cpuMillis: 1 }, true, { cpu: { period: 100000, quota: 1000 } }],
    ["cpu request as shares", { cpuRequestMillis: 500 }, true, { cpu: { shares: 512 } }],
    ["pids", { pids: 20 }, true, { pids: { limit: 20 } }]
  ])("%s", (_name, resources, swapLimit, expected) => {
    expect(Oci.resources(resources, swapLimit)).toEqual({ devices: [{ allow: false, access: "rwm" }], ...expected })
  })
})

describe("Oci.config", () => {
  it("runs command + args with the given env (PATH defaulted), in / as root, with Docker's capabilities", () => {
    const c = Oci.config(input({ spec: spec({ env: { A: "1" } }) }))
    expect(c.process).toMatchObject({
      terminal: false,
      args: ["sh", "-c", "echo hi"],
      env: [`PATH=${Oci.defaultPath}`, "A=1"],
      cwd: "/",
      user: { uid: 0, gid: 0 }
    })
    expect(c.process.capabilities.bounding).toContain("CAP_KILL")
    expect(c.process.capabilities.bounding).not.toContain("CAP_SYS_ADMIN")
    expect(c.root).toEqual({ path: "/data/runc/containers/c1/bundle/rootfs", readonly: false })
    expect(c.linux.cgroupsPath).toBe("kbox-abc/sb/c1")
  })

  it("keeps a PATH of its own, the working dir and the user (gid defaults to the uid)", () => {
    const c = Oci.config(
      input({ spec: spec({ env: { PATH: "/bin" }, workingDir: "/srv", user: { uid: 1000, supplementalGroups: [5] } }) })
    )
    expect(c.process.env).toEqual(["PATH=/bin"])
    expect(c.process.cwd).toBe("/srv")
    expect(c.process.user).toEqual({ uid: 1000, gid: 1000, additionalGids: [5] })
  })

  it.each<[string, Oci.Input["join"], string | undefined, Array<{ type: string; path?: string }>]>([
    ["own namespaces and hostname", undefined, "pod", [{ type: "pid" }, { type: "mount" }, { type: "ipc" }, { type: "uts" }]],
    [
      "the pod's UTS and IPC namespaces joined (its holder set the hostname)",
      { uts: "/proc/7/ns/uts", ipc: "/proc/7/ns/ipc" },
      undefined,
      [{ type: "pid" }, { type: "mount" }, { type: "ipc", path: "/proc/7/ns/ipc" }, { type: "uts", path: "/proc/7/ns/uts" }]
    ]
  ])("%s; never a network namespace (host network)", (_name, join, hostname, namespaces) => {
    const c = Oci.config(input({ hostname: "pod", ...(join === undefined ? {} : { join }) }))
    expect(c.linux.namespaces).toEqual(namespaces)
    expect(c.hostname).toBe(hostname)
  })

  it("mounts proc, sys, dev, then host files read-only, then the spec's bind mounts", () => {
    const c = Oci.config(
      input({
        hostFiles: ["/etc/resolv.conf"],
        spec: spec({ mounts: [{ hostPath: "/srv/data", containerPath: "/data" }, { hostPath: "/srv/cfg", containerPath: "/cfg", readOnly: true }] })
      })
    )
    expect(c.mounts.map((m) => m.destination)).toEqual([
      "/proc",
      "/dev",
      "/dev/pts",
      "/dev/shm",
      "/dev/mqueue",
      "/sys",
      "/sys/fs/cgroup",
      "/etc/resolv.conf",
      "/data",
      "/cfg"
    ])
    expect(c.mounts.slice(-3)).toEqual([
      { destination: "/etc/resolv.conf", type: "bind", source: "/etc/resolv.conf", options: ["rbind", "ro"] },
      { destination: "/data", type: "bind", source: "/srv/data", options: ["rbind", "rw"] },
      { destination: "/cfg", type: "bind", source: "/srv/cfg", options: ["rbind", "ro"] }
    ])
  })
})

describe("Oci.config with a confinement (a request with security)", () => {
  it("runs as the pod's allocated uid with no capabilities, no_new_privs and, when asked, a read-only root", () => {
    const s = spec({ security: { readOnlyRootFilesystem: true } })
    const confinement = Either.getOrThrow(Confinement.decide(s, 200_007))
    const c = Oci.config(input({ spec: s, confinement }))
    expect(c.process.user).toEqual({ uid: 200_007, gid: 200_007 })
    expect(c.process.capabilities).toEqual({ bounding: [], effective: [], permitted: [], inheritable: [], ambient: [] })
    expect(c.process.noNewPrivileges).toBe(true)
    expect(c.root.readonly).toBe(true)
  })

  it("gives runAsUser its groups and exactly the capabilities added; privileged every capability", () => {
    const s = spec({ user: { uid: 1000, gid: 3000, supplementalGroups: [4000] }, security: { capabilities: { add: ["NET_BIND_SERVICE"] } } })
    const c = Oci.config(input({ spec: s, confinement: Either.getOrThrow(Confinement.decide(s, 200_007)) }))
    expect(c.process.user).toEqual({ uid: 1000, gid: 3000, additionalGids: [4000] })
    expect(c.process.capabilities.ambient).toEqual(["CAP_NET_BIND_SERVICE"])
    const p = spec({ user: { uid: 0 }, security: { privileged: true } })
    const priv = Oci.config(input({ spec: p, confinement: Either.getOrThrow(Confinement.decide(p, 200_007)) }))
    expect(priv.process.user.uid).toBe(0)
    expect(priv.process.capabilities.bounding).toContain("CAP_SYS_ADMIN")
    expect(priv.process.noNewPrivileges).toBe(false)
  })
})

describe("user namespaces (UserNamespace, Oci.config with userns)", () => {
  it("gives each pod the lowest free 65536-id range above the allocated uids, and maps its uid to itself", () => {
    const first = UserNamespace.allocateRange(new Set())!
    expect(first).toBe(1_000_000)
    expect(first).toBeGreaterThan(Confinement.uidRange.last)
    const second = UserNamespace.allocateRange(new Set([first]))!
    expect(second).toBe(first + 65_536)
    expect(UserNamespace.allocateRange(new Set([second]))).toBe(first)
    const m = UserNamespace.mappings(first, 200_007)
    expect(m).toEqual([
      { containerID: 0, hostID: 1_000_000, size: 65_536 },
      { containerID: 200_007, hostID: 200_007, size: 1 }
    ])
    expect(UserNamespace.mapText(m)).toBe("0 1000000 65536\n200007 200007 1\n")
    // Image files' owners move into the range; ids past it become the range's nobody.
    expect([0, 1000, 65_535, 200_000].map((id) => UserNamespace.shiftId(id, first))).toEqual([1_000_000, 1_001_000, 1_065_535, 1_065_534])
  })

  it("joins the pod's user namespace with its mappings, and binds the host's /sys (sysfs needs a network namespace of its own)", () => {
    const mappings = UserNamespace.mappings(1_000_000, 200_007)
    const c = Oci.config(input({ userns: { path: "/proc/42/ns/user", mappings } }))
    expect(c.linux.namespaces[0]).toEqual({ type: "user", path: "/proc/42/ns/user" })
    expect(c.linux.uidMappings).toEqual(mappings)
    expect(c.linux.gidMappings).toEqual(mappings)
    expect(c.mounts.filter((m) => m.destination.startsWith("/sys"))).toEqual([
      { destination: "/sys", type: "bind", source: "/sys", options: ["rbind", "nosuid", "noexec", "nodev", "ro"] }
    ])
    const plain = Oci.config(input())
    expect(plain.linux.namespaces.map((n) => n.type)).not.toContain("user")
    expect(plain.linux.uidMappings).toBeUndefined()
  })
})

describe("lastRuncError", () => {
  it.each<[string, string | undefined]>([
    ["", undefined],
    ['{"level":"warning","msg":"a warning"}', undefined],
    [
      '{"level":"error","msg":"runc run failed: unable to start container process: exec: \\"nope\\": executable file not found in $PATH","time":"x"}',
      'unable to start container process: exec: "nope": executable file not found in $PATH'
    ],
    ['not json\n{"level":"error","msg":"first"}\n{"level":"error","msg":"runc exec failed: last"}\n', "last"]
  ])("%j", (text, expected) => expect(lastRuncError(text)).toBe(expected))
})

describe("hierarchyDirs", () => {
  const mountinfo = [
    "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw",
    "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory",
    "32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct",
    "33 25 0:29 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd",
    "34 25 8:1 / / rw - ext4 /dev/vda rw"
  ].join("\n")
  const procCgroup = ["4:memory:/jobs/7", "2:cpu,cpuacct:/", "1:name=systemd:/user", "0::/box/kbox-supervisor"].join("\n")

  it("is under this process's own cgroup in each v1 hierarchy, and under its parent's in v2", () => {
    expect(hierarchyDirs("kbox-x/sb", mountinfo, procCgroup)).toEqual([
      "/sys/fs/cgroup/unified/box/kbox-supervisor/kbox-x/sb",
      "/sys/fs/cgroup/unified/box/kbox-x/sb",
      "/sys/fs/cgroup/memory/jobs/7/kbox-x/sb",
      "/sys/fs/cgroup/cpu,cpuacct/kbox-x/sb",
      "/sys/fs/cgroup/systemd/user/kbox-x/sb"
    ])
  })
})
