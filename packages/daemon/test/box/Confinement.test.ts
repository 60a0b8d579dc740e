/**
 * The box's pure decisions about pods and the node: who a container runs as and with which
 * capabilities (Confinement), and which of the node's directories are covered in a pod's mount
 * namespace and how a volume under one is still reached (NodeHiding).
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Confinement from "../../src/box/Confinement.js"
import * as NodeHiding from "../../src/box/NodeHiding.js"

const decide = (spec: Parameters<typeof Confinement.decide>[0], podUid: number | undefined = 200_000) => Confinement.decide(spec, podUid)

describe("Confinement.decide", () => {
  it("runs a request without security as before: its user, the box's capabilities, no no_new_privs", () => {
    expect(decide({ user: { uid: 5 } })).toEqual(Either.right({ user: { uid: 5, gid: 5, groups: [] }, capabilities: undefined, noNewPrivs: false, readOnlyRoot: false }))
    expect(decide({})).toEqual(Either.right({ user: undefined, capabilities: undefined, noNewPrivs: false, readOnlyRoot: false }))
  })

  it("gives a container without runAsUser the pod's uid, no capabilities and no_new_privs", () => {
    expect(decide({ security: { runAsGroup: 7, supplementalGroups: [8] } })).toEqual(
      Either.right({ user: { uid: 200_000, gid: 7, groups: [8] }, capabilities: [], noNewPrivs: true, readOnlyRoot: false })
    )
  })

  it("gives root the runtimes' default set, then add, then drop (ALL and CAP_ prefixes understood)", () => {
    const root = Either.getOrThrow(decide({ user: { uid: 0 }, security: { capabilities: { add: ["CAP_SYS_TIME"], drop: ["chown"] } } }))
    expect(root.capabilities).toContain("sys_time")
    expect(root.capabilities).toContain("kill")
    expect(root.capabilities).not.toContain("chown")
    expect(root.noNewPrivs).toBe(false)
    expect(Either.getOrThrow(decide({ user: { uid: 0 }, security: { capabilities: { drop: ["ALL"] }, allowPrivilegeEscalation: false } }))).toMatchObject({
      capabilities: [],
      noNewPrivs: true
    })
    expect(Either.getOrThrow(decide({ security: { allowPrivilegeEscalation: true } })).noNewPrivs).toBe(false)
  })

  it("keeps every capability for privileged, and refuses runAsNonRoot as root and unknown capabilities", () => {
    expect(Either.getOrThrow(decide({ user: { uid: 0 }, security: { privileged: true } })).capabilities).toBeUndefined()
    expect(decide({ user: { uid: 0 }, security: { runAsNonRoot: true } })).toEqual(Either.left("container has runAsNonRoot and image will run as root"))
    expect(decide({ security: { runAsNonRoot: true } })._tag).toBe("Right")
    expect(decide({ security: { capabilities: { add: ["FLY"] } } })).toEqual(Either.left('security.capabilities.add: unknown capability "FLY"'))
    expect(decide({ user: { uid: -1 }, security: {} })._tag).toBe("Left")
  })

  it("allocates the lowest free uid of the range, none when all are taken", () => {
    expect(Confinement.allocateUid(new Set())).toBe(Confinement.uidRange.first)
    expect(Confinement.allocateUid(new Set([200_000, 200_001, 200_003]))).toBe(200_002)
    const all = new Set<number>()
    for (let u = Confinement.uidRange.first; u <= Confinement.uidRange.last; u++) all.add(u)
    expect(Confinement.allocateUid(all)).toBeUndefined()
  })

  it("says it to setpriv: identity, the same set for every capability set, no_new_privs", () => {
    expect(Confinement.setprivArgs({ user: { uid: 1, gid: 2, groups: [] }, capabilities: ["kill"], noNewPrivs: true, readOnlyRoot: false })).toEqual([
      "--reuid=1",
      "--regid=2",
      "--clear-groups",
      "--inh-caps=-all,+kill",
      "--ambient-caps=-all,+kill",
      "--bounding-set=-all,+kill",
      "--no-new-privs"
    ])
    expect(Confinement.setprivArgs({ user: undefined, capabilities: undefined, noNewPrivs: false, readOnlyRoot: false })).toEqual([])
  })
})

describe("NodeHiding", () => {
  it("covers each directory once (the outermost), never the host's own directories", () => {
    expect(NodeHiding.plan(["/var/lib/fleet/box", "/var/lib/fleet", "/run", "/tmp", "/", undefined, "relative", "/srv/x/"])).toEqual(["/srv/x", "/var/lib/fleet"])
  })

  it("reaches a volume under a covered directory through the cover's root-only host view", () => {
    expect(NodeHiding.sourceIn(["/data"], "/data/agent/pods/p/vol")).toBe("/data/.kbox-host/agent/pods/p/vol")
    expect(NodeHiding.sourceIn(["/data"], "/data")).toBe("/data/.kbox-host")
    expect(NodeHiding.sourceIn(["/data"], "/database/x")).toBe("/database/x")
    expect(NodeHiding.sourceIn(["/data"], "/srv/vol")).toBe("/srv/vol")
  })
})
