// v1 PersistentVolumeClaim and PersistentVolume: decoding, defaults, and kube-apiserver's
// validation and update rules.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decode, Kinds, Pod, Volume } from "../../src/model/index.js"
import { created, createErrors, updateErrors } from "./harness.js"

const pvc = (spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name: "data-web-0", namespace: "default" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...spec }
})

const pv = (spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: { name: "pv-1" },
  spec: { capacity: { storage: "10Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/srv/pv-1" }, ...spec }
})

describe("PersistentVolumeClaim", () => {
  it("decodes a bound claim as kubectl prints it (strict)", () => {
    const bound = {
      ...pvc({ storageClassName: "standard", volumeName: "pv-1", volumeMode: "Filesystem", selector: { matchLabels: { tier: "fast" } } }),
      status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "10Gi" }, conditions: [{ type: "Resizing", status: "True" }] }
    }
    const r = Kinds.decodeAny(bound, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.shortNames).toEqual(["pvc"])
  })

  it("defaults volumeMode and starts Pending", () => {
    const o = created(pvc())
    expect(o.spec.volumeMode).toBe("Filesystem")
    expect(o.status).toEqual({ phase: "Pending" })
    expect(o.metadata).not.toHaveProperty("generation")
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["no access modes", pvc({ accessModes: [] }), "spec.accessModes: Required value: at least 1 access mode is required"],
    ["an unknown access mode", pvc({ accessModes: ["ReadWriteAlways"] }), 'spec.accessModes[0]: Unsupported value: "ReadWriteAlways": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"'],
    ["ReadWriteOncePod with others", pvc({ accessModes: ["ReadWriteOncePod", "ReadOnlyMany"] }), "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"],
    ["no storage request", pvc({ resources: {} }), "spec.resources[storage]: Required value"],
    ["a zero storage request", pvc({ resources: { requests: { storage: "0" } } }), 'spec.resources[storage]: Invalid value: "0": must be greater than zero'],
    ["a bad volume mode", pvc({ volumeMode: "Raw" }), 'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"'],
    ["a bad storage class name", pvc({ storageClassName: "Fast_SSD" }), 'spec.storageClassName: Invalid value: "Fast_SSD": a lowercase RFC 1123 subdomain']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object).join("\n")).toContain(message)
  })

  describe("updates", () => {
    const old = created(pvc())
    const bound = { ...old, status: { phase: "Bound", capacity: { storage: "1Gi" } } }
    const immutableSpec = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"

    it("lets the binder set volumeName once", () => {
      const named = { ...old, spec: { ...old.spec, volumeName: "pv-1" } }
      expect(updateErrors(named, old)).toEqual([])
      expect(updateErrors({ ...named, spec: { ...named.spec, volumeName: "pv-2" } }, named)).toContain(immutableSpec)
    })

    it("lets a bound claim grow but not shrink", () => {
      expect(updateErrors({ ...bound, spec: { ...bound.spec, resources: { requests: { storage: "2Gi" } } } }, bound)).toEqual([])
      expect(updateErrors({ ...bound, spec: { ...bound.spec, resources: { requests: { storage: "512Mi" } } } }, bound)).toContain(
        "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
      )
    })

    it("does not let an unbound claim change its request", () => {
      expect(updateErrors({ ...old, spec: { ...old.spec, resources: { requests: { storage: "2Gi" } } } }, old)).toContain(immutableSpec)
    })

    it.each<[string, Record<string, unknown>]>([
      ["access modes", { accessModes: ["ReadWriteMany"] }],
      ["the volume mode", { volumeMode: "Block" }],
      ["the selector", { selector: { matchLabels: { a: "b" } } }]
    ])("forbids changing %s", (_, spec) => {
      expect(updateErrors({ ...old, spec: { ...old.spec, ...spec } }, old)).toContain(immutableSpec)
    })

    it("lets a claim without a class get one (the default class, retroactively), but not change it", () => {
      const classed = { ...old, spec: { ...old.spec, storageClassName: "standard" } }
      expect(updateErrors(classed, old)).toEqual([])
      expect(updateErrors({ ...classed, spec: { ...classed.spec, storageClassName: "fast" } }, classed)).toContain(immutableSpec)
    })
  })
})

describe("PersistentVolume", () => {
  it("decodes a bound local volume (strict)", () => {
    const local = {
      ...pv({
        hostPath: undefined,
        local: { path: "/mnt/disks/ssd1" },
        persistentVolumeReclaimPolicy: "Delete",
        storageClassName: "local-storage",
        volumeMode: "Filesystem",
        mountOptions: ["noatime"],
        claimRef: { apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: "default", name: "data-web-0", uid: "c1" },
        nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node-1"] }] }] } }
      }),
      status: { phase: "Bound", lastPhaseTransitionTime: "2024-05-01T10:00:00Z" }
    }
    const r = Kinds.decodeAny(JSON.parse(JSON.stringify(local)), { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.namespaced).toBe(false)
  })

  it("defaults the reclaim policy and volume mode and starts Pending", () => {
    const o = created(pv())
    expect(o.spec).toMatchObject({ persistentVolumeReclaimPolicy: "Retain", volumeMode: "Filesystem" })
    expect(o.status).toEqual({ phase: "Pending" })
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["no capacity", pv({ capacity: {} }), "spec.capacity: Required value"],
    ["a capacity other than storage", pv({ capacity: { storage: "1Gi", cpu: "1" } }), 'spec.capacity: Unsupported value: {"storage":"1Gi","cpu":"1"}: supported values: "storage"'],
    ["no access modes", pv({ accessModes: [] }), "spec.accessModes: Required value"],
    ["no volume source", pv({ hostPath: undefined }), "spec: Required value: must specify a volume type"],
    ["two volume sources", pv({ local: { path: "/mnt" }, nodeAffinity: { required: { nodeSelectorTerms: [] } } }), "spec.local: Forbidden: may not specify more than 1 volume type"],
    ["a local volume without node affinity", pv({ hostPath: undefined, local: { path: "/mnt" } }), "spec.nodeAffinity: Required value: Local volume requires node affinity"],
    ["an unknown reclaim policy", pv({ persistentVolumeReclaimPolicy: "Keep" }), 'spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Recycle", "Retain"']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(JSON.parse(JSON.stringify(object)))).toContain(message)
  })

  it("lets capacity, class, claimRef and reclaim policy change, but not the source or mode", () => {
    const old = created(pv())
    const changed = { ...old, spec: { ...old.spec, capacity: { storage: "20Gi" }, persistentVolumeReclaimPolicy: "Delete", claimRef: { namespace: "default", name: "c" } } }
    expect(updateErrors(changed, old)).toEqual([])
    expect(updateErrors({ ...old, spec: { ...old.spec, hostPath: { path: "/elsewhere" } } }, old)).toContain(
      "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
    )
    expect(updateErrors({ ...old, spec: { ...old.spec, volumeMode: "Block" } }, old)).toContain('volumeMode: Invalid value: "Block": field is immutable')
  })

  it("abbreviates access modes as kubectl does", () => {
    expect(Volume.accessModesShort(["ReadWriteOncePod", "ReadOnlyMany", "ReadWriteOnce"])).toBe("RWO,ROX,RWOP")
  })
})

describe("pod volumes", () => {
  it("mount a claim by name", () => {
    const v = { name: "data", persistentVolumeClaim: { claimName: "data-web-0", readOnly: true } }
    expect(Decode.decodeObject(Pod.Volume, v, { strict: true })).toEqual(Either.right(v))
  })
})
