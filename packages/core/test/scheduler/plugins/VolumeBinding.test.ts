import { describe, expect, it } from "@effect/vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as VolumeBinding from "../../../src/scheduler/plugins/VolumeBinding.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { PodInfo } from "../../../src/scheduler/Snapshot.js"
import { build, filterNodes, hostname, node, nodeJson, pod, verdict } from "./crossFixtures.js"

type Json = Record<string, unknown>

interface ClaimOptions {
  readonly storageClassName?: string
  readonly size?: string
  readonly accessModes?: ReadonlyArray<string>
  readonly volumeName?: string
  readonly selector?: Json
  readonly volumeMode?: string
  readonly metadata?: Json
}

const claim = (name: string, o: ClaimOptions = {}): Json => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name, namespace: "default", uid: `uid-${name}`, ...o.metadata },
  spec: {
    accessModes: o.accessModes ?? ["ReadWriteOnce"],
    resources: { requests: { storage: o.size ?? "1Gi" } },
    ...(o.storageClassName === undefined ? {} : { storageClassName: o.storageClassName }),
    ...(o.volumeName === undefined ? {} : { volumeName: o.volumeName }),
    ...(o.selector === undefined ? {} : { selector: o.selector }),
    ...(o.volumeMode === undefined ? {} : { volumeMode: o.volumeMode })
  },
  status: { phase: o.volumeName === undefined ? "Pending" : "Bound" }
})

interface VolumeOptions {
  /** Local to this node (hostname In [node]). */
  readonly on?: string
  /** A `nodeAffinity.required` of its own. */
  readonly required?: Json
  readonly size?: string
  readonly storageClassName?: string
  readonly accessModes?: ReadonlyArray<string>
  readonly phase?: string
  readonly claimRef?: Json
  readonly labels?: Record<string, string>
  readonly volumeMode?: string
  readonly deleting?: boolean
}

const onNode = (n: string): Json => ({ nodeSelectorTerms: [{ matchExpressions: [{ key: hostname, operator: "In", values: [n] }] }] })

const volume = (name: string, o: VolumeOptions = {}): Json => {
  const required = o.required ?? (o.on === undefined ? undefined : onNode(o.on))
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, labels: o.labels ?? {}, ...(o.deleting === true ? { deletionTimestamp: "2024-01-01T00:00:00Z" } : {}) },
    spec: {
      capacity: { storage: o.size ?? "10Gi" },
      accessModes: o.accessModes ?? ["ReadWriteOnce"],
      local: { path: `/mnt/${name}` },
      ...(required === undefined ? {} : { nodeAffinity: { required } }),
      ...(o.storageClassName === undefined ? {} : { storageClassName: o.storageClassName }),
      ...(o.claimRef === undefined ? {} : { claimRef: o.claimRef }),
      ...(o.volumeMode === undefined ? {} : { volumeMode: o.volumeMode })
    },
    status: { phase: o.phase ?? "Available" }
  }
}

/** An in-memory VolumeLookup whose contents a test may change. */
const store = (claims: ReadonlyArray<Json>, volumes: ReadonlyArray<Json>, classes: Record<string, string> = {}) => {
  const s = { claims: [...claims], volumes: [...volumes] }
  const lookup: VolumeBinding.VolumeLookup = {
    claim: (ns, name) => s.claims.find((c) => (c["metadata"] as Json)["namespace"] === ns && (c["metadata"] as Json)["name"] === name),
    volumes: () => s.volumes,
    storageClass: (name) => (classes[name] === undefined ? undefined : { metadata: { name }, provisioner: "kubernetes.io/no-provisioner", volumeBindingMode: classes[name] })
  }
  return { s, lookup }
}

const plugin = (lookup: VolumeBinding.VolumeLookup | undefined, args: Json = {}) =>
  build<VolumeBinding.VolumeBinding>(VolumeBinding.factory, args, lookup === undefined ? {} : { volumes: lookup })

const using = (...claims: ReadonlyArray<string>): PodInfo =>
  pod({ name: "user", spec: { volumes: claims.map((c, i) => ({ name: `v${i}`, persistentVolumeClaim: { claimName: c } })) } })

const nodes = [node("n1"), node("n2"), node("n3")]
const ok = "ok"
const nodeConflict = `UnschedulableAndUnresolvable: ${VolumeBinding.reasonNodeConflict}`
const bindConflict = `UnschedulableAndUnresolvable: ${VolumeBinding.reasonBindConflict}`
const both = `UnschedulableAndUnresolvable: ${VolumeBinding.reasonNodeConflict}, ${VolumeBinding.reasonBindConflict}`
const pvMissing = `UnschedulableAndUnresolvable: ${VolumeBinding.reasonPVNotExist}`

describe("VolumeBinding Filter", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly pod?: PodInfo
    readonly claims: ReadonlyArray<Json>
    readonly volumes: ReadonlyArray<Json>
    readonly want: Record<string, string>
  }> = [
    {
      name: "a bound claim follows its volume's node affinity",
      claims: [claim("data", { volumeName: "pv1" })],
      volumes: [volume("pv1", { on: "n1", claimRef: { namespace: "default", name: "data" }, phase: "Bound" })],
      want: { n1: ok, n2: nodeConflict, n3: nodeConflict }
    },
    {
      name: "a bound claim whose volume has no affinity fits anywhere",
      claims: [claim("data", { volumeName: "pv1" })],
      volumes: [volume("pv1", { claimRef: { namespace: "default", name: "data" }, phase: "Bound" })],
      want: { n1: ok, n2: ok, n3: ok }
    },
    {
      name: "a bound claim whose volume is gone fits nowhere",
      claims: [claim("data", { volumeName: "gone" })],
      volumes: [],
      want: { n1: pvMissing, n2: pvMissing, n3: pvMissing }
    },
    {
      name: "an unbound claim (no class: waits for its consumer) needs a local volume on the node",
      claims: [claim("data", { size: "8Gi" })],
      volumes: [volume("pv1", { on: "n1", size: "10Gi" }), volume("pv2", { on: "n2", size: "5Gi" })],
      want: { n1: ok, n2: bindConflict, n3: bindConflict }
    },
    {
      name: "the volume's class must be the claim's",
      claims: [claim("data", { storageClassName: "fast" })],
      volumes: [volume("pv1", { on: "n1", storageClassName: "slow" }), volume("pv2", { on: "n2", storageClassName: "fast" })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "the volume must offer every access mode the claim asks",
      claims: [claim("data", { accessModes: ["ReadWriteOnce", "ReadOnlyMany"] })],
      volumes: [volume("pv1", { on: "n1" }), volume("pv2", { on: "n2", accessModes: ["ReadOnlyMany", "ReadWriteOnce"] })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "volume modes must agree (Filesystem by default)",
      claims: [claim("data", { volumeMode: "Block" })],
      volumes: [volume("pv1", { on: "n1" }), volume("pv2", { on: "n2", volumeMode: "Block" })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "the claim's selector picks volumes by label",
      claims: [claim("data", { selector: { matchLabels: { disk: "ssd" } } })],
      volumes: [volume("pv1", { on: "n1", labels: { disk: "hdd" } }), volume("pv2", { on: "n2", labels: { disk: "ssd" } })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "only Available volumes (or Pending ones without a claim: no PV controller moves them on)",
      claims: [claim("data")],
      volumes: [volume("pv1", { on: "n1", phase: "Released" }), volume("pv2", { on: "n2", phase: "Pending" }), volume("pv3", { on: "n3", phase: "Failed" })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "a volume claimed by another claim, or being deleted, is not offered",
      claims: [claim("data")],
      volumes: [volume("pv1", { on: "n1", claimRef: { namespace: "default", name: "other" } }), volume("pv2", { on: "n2", deleting: true })],
      want: { n1: bindConflict, n2: bindConflict, n3: bindConflict }
    },
    {
      name: "a volume pre-bound to the claim is the only one it may take",
      claims: [claim("data")],
      volumes: [volume("pv1", { on: "n1" }), volume("pv2", { on: "n2", claimRef: { namespace: "default", name: "data" } })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "two claims never share a volume",
      pod: using("a", "b"),
      claims: [claim("a"), claim("b")],
      volumes: [volume("pv1", { on: "n1" }), volume("pv2", { on: "n2" }), volume("pv3", { on: "n2" })],
      want: { n1: bindConflict, n2: ok, n3: bindConflict }
    },
    {
      name: "affinity by metadata.name (matchFields)",
      claims: [claim("data")],
      volumes: [volume("pv1", { required: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n3"] }] }] } })],
      want: { n1: bindConflict, n2: bindConflict, n3: ok }
    },
    {
      name: "affinity with several terms (any of them)",
      claims: [claim("data")],
      volumes: [
        volume("pv1", {
          required: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: hostname, operator: "In", values: ["n1"] }] }, { matchExpressions: [{ key: hostname, operator: "In", values: ["n3"] }] }]
          }
        })
      ],
      want: { n1: ok, n2: bindConflict, n3: ok }
    },
    {
      name: "affinity by an In requirement with further requirements in its term",
      claims: [claim("data")],
      volumes: [
        volume("pv1", {
          required: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: hostname, operator: "In", values: ["n1", "n2"] },
                  { key: hostname, operator: "NotIn", values: ["n2"] }
                ]
              }
            ]
          }
        })
      ],
      want: { n1: ok, n2: bindConflict, n3: bindConflict }
    },
    {
      name: "bound and unbound claims together report both reasons",
      pod: using("bound", "free"),
      claims: [claim("bound", { volumeName: "pv1" }), claim("free")],
      volumes: [volume("pv1", { on: "n1", claimRef: { namespace: "default", name: "bound" }, phase: "Bound" }), volume("pv2", { on: "n1" })],
      want: { n1: ok, n2: both, n3: both }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const { lookup } = store(c.claims, c.volumes, { fast: "WaitForFirstConsumer", slow: "WaitForFirstConsumer" })
      const run = filterNodes(plugin(lookup), c.pod ?? using("data"), nodes)
      expect(run.preFilter).toBe("ok")
      expect(run.verdicts).toEqual(c.want)
    })
  }
})

describe("VolumeBinding PreFilter", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly pod: PodInfo
    readonly claims: ReadonlyArray<Json>
    readonly classes?: Record<string, string>
    readonly args?: Json
    readonly want: string
  }> = [
    { name: "a pod without claims is skipped", pod: pod({ spec: { volumes: [{ name: "tmp", emptyDir: {} }] } }), claims: [], want: "Skip: " },
    { name: "a missing claim", pod: using("data"), claims: [], want: `UnschedulableAndUnresolvable: persistentvolumeclaim "data" not found` },
    {
      name: "a claim being deleted",
      pod: using("data"),
      claims: [claim("data", { metadata: { deletionTimestamp: "2024-01-01T00:00:00Z" } })],
      want: `UnschedulableAndUnresolvable: persistentvolumeclaim "data" is being deleted`
    },
    {
      name: "an unbound claim of an Immediate class waits for the volume controller",
      pod: using("data"),
      claims: [claim("data", { storageClassName: "fast" })],
      classes: { fast: "Immediate" },
      want: `UnschedulableAndUnresolvable: ${VolumeBinding.reasonUnboundImmediate}`
    },
    {
      name: "an unknown class counts as Immediate",
      pod: using("data"),
      claims: [claim("data", { storageClassName: "fast" })],
      want: `UnschedulableAndUnresolvable: ${VolumeBinding.reasonUnboundImmediate}`
    },
    { name: "a WaitForFirstConsumer class from the lookup", pod: using("data"), claims: [claim("data", { storageClassName: "local" })], classes: { local: "WaitForFirstConsumer" }, want: "ok" },
    { name: "a WaitForFirstConsumer class from the args", pod: using("data"), claims: [claim("data", { storageClassName: "local" })], args: { waitForFirstConsumer: ["local"] }, want: "ok" },
    {
      name: "the lookup's class wins over the args",
      pod: using("data"),
      claims: [claim("data", { storageClassName: "local" })],
      classes: { local: "Immediate" },
      args: { waitForFirstConsumer: ["local"] },
      want: `UnschedulableAndUnresolvable: ${VolumeBinding.reasonUnboundImmediate}`
    },
    {
      name: "an ephemeral volume's claim must be the pod's own",
      pod: pod({ name: "app", spec: { volumes: [{ name: "scratch", ephemeral: { volumeClaimTemplate: { spec: {} } } }] } }),
      claims: [claim("app-scratch", { metadata: { ownerReferences: [{ kind: "Pod", name: "app", uid: "someone-else", controller: true }] } })],
      want: `UnschedulableAndUnresolvable: PVC default/app-scratch was not created for pod default/app (pod is not owner)`
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const { lookup } = store(c.claims, [volume("pv1", { on: "n1", storageClassName: "local" }), volume("pv0", { on: "n1" })], c.classes)
      expect(filterNodes(plugin(lookup, c.args), c.pod, nodes).preFilter).toBe(c.want)
    })
  }

  it("an ephemeral volume's own claim is used", () => {
    const p = pod({ name: "app", spec: { volumes: [{ name: "scratch", ephemeral: { volumeClaimTemplate: { spec: {} } } }] } })
    const { lookup } = store([claim("app-scratch", { metadata: { ownerReferences: [{ kind: "Pod", name: "app", uid: p.uid, controller: true }] } })], [volume("pv1", { on: "n2" })])
    expect(filterNodes(plugin(lookup), p, nodes).verdicts).toEqual({ n1: bindConflict, n2: ok, n3: bindConflict })
  })

  it("without a volume lookup it cannot see storage and skips every pod (the baseline scheduler's behaviour)", () => {
    expect(filterNodes(plugin(undefined), using("data"), nodes).preFilter).toBe("Skip: ")
    expect(filterNodes(plugin(undefined), pod(), nodes).preFilter).toBe("Skip: ")
  })

  it("takes the lookup from the args too", () => {
    const { lookup } = store([claim("data")], [volume("pv1", { on: "n2" })])
    const p = build<VolumeBinding.VolumeBinding>(VolumeBinding.factory, { volumes: lookup })
    expect(filterNodes(p, using("data"), nodes).verdicts).toEqual({ n1: bindConflict, n2: ok, n3: bindConflict })
  })

  it("refuses a malformed waitForFirstConsumer", () => {
    expect(VolumeBinding.factory({ waitForFirstConsumer: "local" }, { schedulerName: "s" })).toMatch(/waitForFirstConsumer: Invalid value/)
  })
})

describe("VolumeBinding Reserve", () => {
  const reserveOn = (p: ReturnType<typeof plugin>, user: PodInfo, nodeName: string) => {
    const state = new CycleState()
    const pre = p.preFilter(state, user, Snapshot.make(nodes))
    expect(pre.status.code).toBe("Success")
    return { state, status: verdict(p.reserve(state, user, nodeName)) }
  }

  it("picks the smallest fitting volume per claim on the chosen node, smaller claims first", () => {
    const { lookup } = store(
      [claim("big", { size: "20Gi" }), claim("small", { size: "1Gi" })],
      [volume("pv-30", { on: "n1", size: "30Gi" }), volume("pv-20", { on: "n1", size: "20Gi" }), volume("pv-2", { on: "n1", size: "2Gi" }), volume("pv-other", { on: "n2", size: "1Gi" })]
    )
    const { state, status } = reserveOn(plugin(lookup), using("big", "small"), "n1")
    expect(status).toBe(ok)
    expect(VolumeBinding.bindings(state)).toEqual([
      { namespace: "default", claim: "small", claimUid: "uid-small", volume: "pv-2" },
      { namespace: "default", claim: "big", claimUid: "uid-big", volume: "pv-20" }
    ])
  })

  it("holds reserved volumes from other claims until Unreserve, or until the volume shows its claimRef", () => {
    const { s, lookup } = store([claim("a"), claim("b")], [volume("pv1", { on: "n1" })])
    const p = plugin(lookup)
    const first = reserveOn(p, using("a"), "n1")
    expect(first.status).toBe(ok)
    // Another pod's claim no longer finds pv1 …
    expect(filterNodes(p, using("b"), nodes).verdicts).toEqual({ n1: bindConflict, n2: bindConflict, n3: bindConflict })
    // … but the same claim still does (a retry of the same pod).
    expect(filterNodes(p, using("a"), nodes).verdicts["n1"]).toBe(ok)
    p.unreserve(first.state, using("a"), "n1")
    expect(VolumeBinding.bindings(first.state)).toEqual([])
    expect(filterNodes(p, using("b"), nodes).verdicts["n1"]).toBe(ok)
    // Reserved again, then the runtime's write lands: the volume is claimed and the hold dropped.
    reserveOn(p, using("a"), "n1")
    s.volumes[0] = volume("pv1", { on: "n1", claimRef: { namespace: "default", name: "a", uid: "uid-a" }, phase: "Bound" })
    s.volumes.push(volume("pv2", { on: "n1" }))
    expect(filterNodes(p, using("b"), nodes).verdicts["n1"]).toBe(ok)
  })

  it("fails when a volume chosen at Filter was taken by another pod's Reserve since", () => {
    const { lookup } = store([claim("a"), claim("b")], [volume("pv1", { on: "n1" })])
    const p = plugin(lookup)
    const stateB = new CycleState()
    p.preFilter(stateB, using("b"), Snapshot.make(nodes))
    expect(reserveOn(p, using("a"), "n1").status).toBe(ok)
    expect(verdict(p.reserve(stateB, using("b"), "n1"))).toBe(`Unschedulable: ${VolumeBinding.reasonBindConflict}`)
    expect(VolumeBinding.bindings(stateB)).toEqual([])
  })

  it("binds nothing for bound claims", () => {
    const { lookup } = store([claim("data", { volumeName: "pv1" })], [volume("pv1", { on: "n1", claimRef: { namespace: "default", name: "data" }, phase: "Bound" })])
    const { state, status } = reserveOn(plugin(lookup), using("data"), "n1")
    expect(status).toBe(ok)
    expect(VolumeBinding.bindings(state)).toEqual([])
  })
})

describe("VolumeBinding at scale", () => {
  it("filters 5,000 nodes against 5,000 local volumes through the affinity index", () => {
    const many = Array.from({ length: 5000 }, (_, i) => node(`node-${i}`))
    const volumes = Array.from({ length: 5000 }, (_, i) => volume(`pv-${i}`, { on: `node-${i}`, size: i % 2 === 0 ? "5Gi" : "50Gi" }))
    const { lookup } = store([claim("data", { size: "10Gi" })], volumes)
    const run = filterNodes(plugin(lookup), using("data"), many)
    expect(Object.values(run.verdicts).filter((v) => v === ok)).toHaveLength(2500)
    expect(run.verdicts["node-1"]).toBe(ok)
    expect(run.verdicts["node-0"]).toBe(bindConflict)
  })
})

describe("VolumeBinding with dynamic provisioning", () => {
  const withRoot = (name: string, labels: Record<string, string> = {}) => {
    const n = nodeJson(name, labels)
    return Snapshot.nodeInfo({ ...n, metadata: { ...(n["metadata"] as Json), annotations: { "storage.fleet.koder.dev/local-path-root": "/var/lib/fleet/storage" } } }, [])
  }
  const classes = (sc: Json) => ({ storageClass: (name: string) => (name === (sc["metadata"] as Json)["name"] ? sc : undefined) })
  const localPath = { metadata: { name: "local-path" }, provisioner: "fleet.koder.dev/local-path", volumeBindingMode: "WaitForFirstConsumer" }
  const lookupOf = (claims: ReadonlyArray<Json>, volumes: ReadonlyArray<Json>, sc: Json): VolumeBinding.VolumeLookup => ({ ...store(claims, volumes).lookup, ...classes(sc) })

  it("local-path: a node whose agent has a root can provision; others cannot", () => {
    const p = plugin(lookupOf([claim("data", { storageClassName: "local-path" })], [], localPath))
    expect(filterNodes(p, using("data"), [withRoot("n1"), node("n2")]).verdicts).toEqual({ n1: ok, n2: bindConflict })
  })

  it("a fitting pre-made volume is still preferred on its node; elsewhere the class provisions", () => {
    const sc = { metadata: { name: "fast" }, provisioner: "example.com/fast", volumeBindingMode: "WaitForFirstConsumer" }
    const p = plugin(lookupOf([claim("data", { storageClassName: "fast" })], [volume("pv1", { on: "n1", storageClassName: "fast" })], sc))
    const state = new CycleState()
    expect(p.preFilter(state, using("data"), Snapshot.make(nodes)).status.code).toBe("Success")
    expect(verdict(p.reserve(state, using("data"), "n1"))).toBe(ok)
    expect(VolumeBinding.bindings(state)).toEqual([{ namespace: "default", claim: "data", claimUid: "uid-data", volume: "pv1" }])
    const other = new CycleState()
    p.preFilter(other, using("data"), Snapshot.make(nodes))
    expect(verdict(p.reserve(other, using("data"), "n2"))).toBe(ok)
    expect(VolumeBinding.bindings(other)).toEqual([{ namespace: "default", claim: "data", claimUid: "uid-data", volume: "", node: "n2" }])
  })

  it("allowedTopologies limits the nodes a class provisions on", () => {
    const sc = { metadata: { name: "zonal" }, provisioner: "example.com/z", volumeBindingMode: "WaitForFirstConsumer", allowedTopologies: [{ matchLabelExpressions: [{ key: "zone", values: ["a"] }] }] }
    const p = plugin(lookupOf([claim("data", { storageClassName: "zonal" })], [], sc))
    expect(filterNodes(p, using("data"), [node("n1", { zone: "a" }), node("n2", { zone: "b" }), node("n3")]).verdicts).toEqual({ n1: ok, n2: bindConflict, n3: bindConflict })
  })

  it("no-provisioner classes and Immediate classes do not provision at scheduling", () => {
    const manual = { metadata: { name: "manual" }, provisioner: "kubernetes.io/no-provisioner", volumeBindingMode: "WaitForFirstConsumer" }
    expect(filterNodes(plugin(lookupOf([claim("data", { storageClassName: "manual" })], [], manual)), using("data"), nodes).verdicts).toEqual({ n1: bindConflict, n2: bindConflict, n3: bindConflict })
    const immediate = { metadata: { name: "now" }, provisioner: "example.com/now", volumeBindingMode: "Immediate" }
    expect(filterNodes(plugin(lookupOf([claim("data", { storageClassName: "now" })], [], immediate)), using("data"), nodes).preFilter).toBe(`UnschedulableAndUnresolvable: ${VolumeBinding.reasonUnboundImmediate}`)
  })
})
