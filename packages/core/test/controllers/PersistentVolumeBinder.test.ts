import { describe, expect, it } from "vitest"
import * as LocalPathProvisioner from "../../src/controllers/LocalPathProvisioner.js"
import * as PersistentVolumeBinder from "../../src/controllers/PersistentVolumeBinder.js"
import * as Storage from "../../src/model/Storage.js"

type Json = Record<string, any>

const claim = (over: { spec?: Json; status?: Json; annotations?: Json; deleting?: boolean } = {}): Json => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name: "c", namespace: "ns", uid: "u1", resourceVersion: "5", ...(over.annotations === undefined ? {} : { annotations: over.annotations }), ...(over.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...over.spec },
  ...(over.status === undefined ? {} : { status: over.status })
})
const volume = (name: string, over: { spec?: Json; status?: Json; annotations?: Json } = {}): Json => ({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: { name, resourceVersion: "3", ...(over.annotations === undefined ? {} : { annotations: over.annotations }) },
  spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: `/srv/${name}` }, ...over.spec },
  ...(over.status === undefined ? {} : { status: over.status })
})
const sc = (name: string, over: Json = {}): Json => ({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name }, provisioner: Storage.NoProvisioner, volumeBindingMode: "Immediate", ...over })
const view = (volumes: ReadonlyArray<Json>, classes: ReadonlyArray<Json> = [], defaultClass?: string): PersistentVolumeBinder.ClaimView => ({
  volumes,
  volume: (n) => volumes.find((v) => v["metadata"]["name"] === n),
  storageClass: (n) => classes.find((c) => c["metadata"]["name"] === n),
  defaultClass
})
const ref = { namespace: "ns", name: "c", uid: "u1" }

describe("PersistentVolumeBinder.decideClaim", () => {
  const cases: ReadonlyArray<readonly [string, Json, PersistentVolumeBinder.ClaimView, (a: PersistentVolumeBinder.ClaimAction) => void]> = [
    ["a claim being deleted is left alone", claim({ deleting: true }), view([]), (a) => expect(a._tag).toBe("None")],
    ["no class and a default exists: the default is assigned", claim(), view([], [], "local-path"), (a) => expect(a).toEqual({ _tag: "SetClass", className: "local-path" })],
    ["an explicit empty class keeps no class (left to the scheduler)", claim({ spec: { storageClassName: "" } }), view([volume("v")], [], "local-path"), (a) => expect(a._tag).toBe("Pending")],
    [
      "Immediate: the smallest fitting volume",
      claim({ spec: { storageClassName: "m" } }),
      view([volume("big", { spec: { storageClassName: "m", capacity: { storage: "5Gi" } } }), volume("fit", { spec: { storageClassName: "m", capacity: { storage: "2Gi" } } }), volume("small", { spec: { storageClassName: "m", capacity: { storage: "500Mi" } } })], [sc("m")]),
      (a) => expect(a._tag === "Bind" && (a.volume as Json)["metadata"]["name"]).toBe("fit")
    ],
    [
      "Immediate: other classes, modes and claimed volumes do not fit",
      claim({ spec: { storageClassName: "m" } }),
      view([volume("other", { spec: { storageClassName: "x" } }), volume("rwx", { spec: { storageClassName: "m", accessModes: ["ReadOnlyMany"] } }), volume("taken", { spec: { storageClassName: "m", claimRef: { namespace: "ns", name: "d" } } })], [sc("m")]),
      (a) => expect(a).toEqual({ _tag: "Pending", event: { type: "Warning", reason: "FailedBinding", message: "no persistent volumes available for this claim" } })
    ],
    [
      "a volume pre-bound to the claim wins over a smaller one",
      claim({ spec: { storageClassName: "m" } }),
      view([volume("mine", { spec: { storageClassName: "m", capacity: { storage: "9Gi" }, claimRef: { namespace: "ns", name: "c" } } }), volume("fit", { spec: { storageClassName: "m" } })], [sc("m")]),
      (a) => expect(a._tag === "Bind" && (a.volume as Json)["metadata"]["name"]).toBe("mine")
    ],
    [
      "WaitForFirstConsumer without a selected node waits, with upstream's Event once",
      claim({ spec: { storageClassName: "local-path" } }),
      view([volume("v", { spec: { storageClassName: "local-path" } })], [Storage.localPathClass]),
      (a) => expect(a).toEqual({ _tag: "Pending", event: { type: "Normal", reason: "WaitForFirstConsumer", message: "waiting for first consumer to be created before binding" } })
    ],
    ["WaitForFirstConsumer, already Pending: nothing more", claim({ spec: { storageClassName: "local-path" }, status: { phase: "Pending" } }), view([], [Storage.localPathClass]), (a) => expect(a._tag).toBe("None")],
    [
      "a selected node and a provisioner: handed to it",
      claim({ spec: { storageClassName: "local-path" }, annotations: { [Storage.SelectedNodeAnnotation]: "n1" } }),
      view([], [Storage.localPathClass]),
      (a) => expect(a).toEqual({ _tag: "Provision", provisioner: Storage.LocalPathProvisioner })
    ],
    ["bound, its volume gone: Lost", claim({ spec: { volumeName: "v" }, status: { phase: "Bound" } }), view([]), (a) => expect(a._tag).toBe("Lost")],
    ["volumeName set by the user, volume without claimRef: bind it", claim({ spec: { volumeName: "v" } }), view([volume("v")]), (a) => expect(a._tag).toBe("Bind")],
    ["bound to a volume claimed by another claim: Lost", claim({ spec: { volumeName: "v" }, status: { phase: "Bound" } }), view([volume("v", { spec: { claimRef: { namespace: "ns", name: "d", uid: "u9" } } })]), (a) => expect(a._tag).toBe("Lost")],
    [
      "bound and in sync: nothing",
      claim({ spec: { volumeName: "v" }, status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } } }),
      view([volume("v", { spec: { claimRef: ref }, status: { phase: "Bound" } })]),
      (a) => expect(a._tag).toBe("None")
    ],
    [
      "grown past a local-path volume whose class allows expansion: Expand",
      claim({ spec: { volumeName: "v", storageClassName: "local-path", resources: { requests: { storage: "3Gi" } } }, status: { phase: "Bound" } }),
      view([volume("v", { spec: { claimRef: ref }, annotations: { [Storage.ProvisionedByAnnotation]: Storage.LocalPathProvisioner } })], [Storage.localPathClass]),
      (a) => expect(a._tag === "Expand" && a.storage).toBe("3Gi")
    ],
    [
      "grown past a hand-made volume: not expanded",
      claim({ spec: { volumeName: "v", storageClassName: "local-path", resources: { requests: { storage: "3Gi" } } }, status: { phase: "Bound" } }),
      view([volume("v", { spec: { claimRef: ref } })], [Storage.localPathClass]),
      (a) => expect(a._tag).toBe("None")
    ]
  ]
  for (const [name, c, v, check] of cases) it(name, () => check(PersistentVolumeBinder.decideClaim(c, v)))
})

describe("PersistentVolumeBinder.decideVolume", () => {
  const provisioned = { [Storage.ProvisionedByAnnotation]: Storage.LocalPathProvisioner }
  const cases: ReadonlyArray<readonly [string, Json, Json | undefined, PersistentVolumeBinder.VolumeAction]> = [
    ["no claimRef: Available", volume("v"), undefined, { _tag: "Phase", phase: "Available" }],
    ["no claimRef, already Available: nothing", volume("v", { status: { phase: "Available" } }), undefined, { _tag: "None" }],
    ["its claim there: Bound", volume("v", { spec: { claimRef: ref } }), claim({ spec: { volumeName: "v" } }), { _tag: "Phase", phase: "Bound" }],
    ["its claim gone: Released", volume("v", { spec: { claimRef: ref }, status: { phase: "Bound" } }), undefined, { _tag: "Phase", phase: "Released" }],
    ["a new claim of the same name is not its claim", volume("v", { spec: { claimRef: ref }, status: { phase: "Bound" } }), { ...claim(), metadata: { ...claim()["metadata"], uid: "u2" } }, { _tag: "Phase", phase: "Released" }],
    ["Released, Retain (the default of hand-made volumes): kept", volume("v", { spec: { claimRef: ref }, status: { phase: "Released" } }), undefined, { _tag: "None" }],
    ["Released, Delete, provisioned: deleted", volume("v", { spec: { claimRef: ref, persistentVolumeReclaimPolicy: "Delete" }, status: { phase: "Released" }, annotations: provisioned }), undefined, { _tag: "Delete" }],
    [
      "Released, Delete, hand-made: Failed (no deleter)",
      volume("v", { spec: { claimRef: ref, persistentVolumeReclaimPolicy: "Delete" }, status: { phase: "Released" } }),
      undefined,
      { _tag: "Phase", phase: "Failed", reason: "VolumeFailedDelete", message: "no deleter for this volume: Fleet deletes only volumes its provisioners made" }
    ],
    ["Released, Recycle: Failed", volume("v", { spec: { claimRef: ref, persistentVolumeReclaimPolicy: "Recycle" }, status: { phase: "Released" } }), undefined, { _tag: "Phase", phase: "Failed", reason: "VolumeFailedRecycle", message: "Recycle is not supported: use Delete or Retain" }]
  ]
  for (const [name, pv, c, want] of cases) it(name, () => expect(PersistentVolumeBinder.decideVolume(pv, c)).toEqual(want))
})

describe("LocalPathProvisioner.decide", () => {
  const handed = { [Storage.StorageProvisionerAnnotation]: Storage.LocalPathProvisioner, [Storage.SelectedNodeAnnotation]: "n1" }
  const node = { apiVersion: "v1", kind: "Node", metadata: { name: "n1", annotations: { [Storage.LocalPathRootAnnotation]: "/data/storage/" } } }
  const local = claim({ spec: { storageClassName: "local-path" }, annotations: handed })
  it("makes a pre-bound directory volume on the selected node", () => {
    const d = LocalPathProvisioner.decide(local, Storage.localPathClass as unknown as Json, node, undefined)
    expect(d._tag).toBe("Create")
    const pv = (d as { volume: Json }).volume
    expect(pv["metadata"]["name"]).toBe("pvc-u1")
    expect(pv["metadata"]["finalizers"]).toEqual([Storage.LocalPathFinalizer])
    expect(pv["spec"]).toMatchObject({
      capacity: { storage: "1Gi" },
      persistentVolumeReclaimPolicy: "Delete",
      storageClassName: "local-path",
      hostPath: { path: "/data/storage/pvc-u1_ns_c", type: "DirectoryOrCreate" },
      claimRef: { namespace: "ns", name: "c", uid: "u1" },
      nodeAffinity: { required: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n1"] }] }] } }
    })
  })
  const cases: ReadonlyArray<readonly [string, Json, Json | undefined, Json | undefined, Json | undefined, string]> = [
    ["not handed over yet", claim({ spec: { storageClassName: "local-path" } }), Storage.localPathClass as unknown as Json, node, undefined, "None"],
    ["another provisioner's class", local, { ...sc("local-path"), provisioner: "example.com/x" }, node, undefined, "None"],
    ["its volume exists already", local, Storage.localPathClass as unknown as Json, node, { metadata: { name: "pvc-u1" } }, "None"],
    ["ReadWriteMany", claim({ spec: { storageClassName: "local-path", accessModes: ["ReadWriteMany"] }, annotations: handed }), Storage.localPathClass as unknown as Json, node, undefined, "Refuse"],
    ["a block volume", claim({ spec: { storageClassName: "local-path", volumeMode: "Block" }, annotations: handed }), Storage.localPathClass as unknown as Json, node, undefined, "Refuse"],
    ["a node without a root", local, Storage.localPathClass as unknown as Json, { metadata: { name: "n1" } }, undefined, "Refuse"],
    ["a node that is gone", local, Storage.localPathClass as unknown as Json, undefined, undefined, "Refuse"]
  ]
  for (const [name, c, cls, n, existing, tag] of cases) it(name, () => expect(LocalPathProvisioner.decide(c, cls, n, existing)._tag).toBe(tag))
})
