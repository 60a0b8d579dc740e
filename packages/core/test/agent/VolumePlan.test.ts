import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as VolumePlan from "../../src/agent/VolumePlan.js"
import type * as Pod from "../../src/model/Pod.js"
import type * as Volume from "../../src/model/Volume.js"

const pod = (volumes: ReadonlyArray<Pod.Volume>, mounts: ReadonlyArray<Pod.VolumeMount> = []): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", labels: { app: "web" } },
  spec: { serviceAccountName: "builder", containers: [{ name: "app", image: "i", volumeMounts: mounts }], volumes }
})

const claim = (name: string, volumeName: string | undefined, phase: "Bound" | "Pending"): Volume.PersistentVolumeClaim => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name, namespace: "default" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...(volumeName === undefined ? {} : { volumeName }) },
  status: { phase }
})

const lookup: VolumePlan.Lookup = {
  configMap: (name) => (name === "cfg" ? { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { "app.conf": "a=1", other: "o" }, binaryData: { "logo.png": "iVBO" } } : undefined),
  secret: (name) => (name === "creds" ? { apiVersion: "v1", kind: "Secret", metadata: { name }, data: { password: btoa("pw") } } : undefined),
  claim: (name) => (name === "data" ? claim("data", "pv-1", "Bound") : name === "pending" ? claim("pending", undefined, "Pending") : undefined),
  volume: (name) =>
    name === "pv-1"
      ? { apiVersion: "v1", kind: "PersistentVolume", metadata: { name }, spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], local: { path: "/mnt/disk1" } } }
      : undefined,
  token: (r) => (r.serviceAccountName === "builder" ? `token-for-${r.audience}` : undefined)
}

const dir = VolumePlan.podDir("/var/lib/fleet/", "u1")
const context = { hostIP: "10.0.0.5", podIP: "10.0.0.5", nodeAllocatable: {} }
const plan = (p: Pod.Pod) => VolumePlan.plan(p, lookup, dir, context)
const files = (p: Pod.Pod) =>
  Either.map(plan(p), (x) => x.sources.flatMap((s) => (s._tag === "Files" ? s.files.map((f) => `${s.path.slice(dir.length)}/${f.path}=${f.data}:${f.encoding}:${f.mode.toString(8)}`) : [])))

describe("VolumePlan", () => {
  it("lays out volumes like the kubelet, and mounts them (subPath appended, projections read-only)", () => {
    const p = pod(
      [{ name: "scratch", emptyDir: {} }, { name: "cfg", configMap: { name: "cfg" } }, { name: "host", hostPath: { path: "/srv/data", type: "DirectoryOrCreate" } }, { name: "data", persistentVolumeClaim: { claimName: "data" } }],
      [
        { name: "scratch", mountPath: "/tmp/scratch" },
        { name: "cfg", mountPath: "/etc/app" },
        { name: "host", mountPath: "/data", subPath: "web", readOnly: true },
        { name: "data", mountPath: "/var/data" }
      ]
    )
    const result = Either.getOrThrow(plan(p))
    expect(result.sources.map((s) => `${s._tag}:${s.path}`)).toEqual([
      "EmptyDir:/var/lib/fleet/pods/u1/volumes/kubernetes.io~empty-dir/scratch",
      "Files:/var/lib/fleet/pods/u1/volumes/kubernetes.io~configmap/cfg",
      "HostPath:/srv/data",
      "HostPath:/mnt/disk1"
    ])
    expect(result.mounts.get("app")).toEqual([
      { hostPath: "/var/lib/fleet/pods/u1/volumes/kubernetes.io~empty-dir/scratch", containerPath: "/tmp/scratch" },
      { hostPath: "/var/lib/fleet/pods/u1/volumes/kubernetes.io~configmap/cfg", containerPath: "/etc/app", readOnly: true },
      { hostPath: "/srv/data/web", containerPath: "/data", readOnly: true },
      { hostPath: "/mnt/disk1", containerPath: "/var/data" }
    ])
    expect(VolumePlan.mountEnv(p.spec.containers[0]!, result).map((v) => v.name)).toEqual(["FLEET_VOLUME_SCRATCH", "FLEET_VOLUME_CFG", "FLEET_VOLUME_HOST", "FLEET_VOLUME_DATA"])
  })

  const fileCases: ReadonlyArray<[string, Pod.Volume, Either.Either<ReadonlyArray<string>, string>]> = [
    [
      "a ConfigMap: every key (binaryData base64), mode 644",
      { name: "cfg", configMap: { name: "cfg" } },
      Either.right(["/volumes/kubernetes.io~configmap/cfg/app.conf=a=1:utf8:644", "/volumes/kubernetes.io~configmap/cfg/other=o:utf8:644", "/volumes/kubernetes.io~configmap/cfg/logo.png=iVBO:base64:644"])
    ],
    [
      "items pick keys, paths and modes; defaultMode applies to the rest",
      { name: "cfg", configMap: { name: "cfg", defaultMode: 0o600, items: [{ key: "app.conf", path: "conf/app.conf" }, { key: "other", path: "o", mode: 0o400 }] } },
      Either.right(["/volumes/kubernetes.io~configmap/cfg/conf/app.conf=a=1:utf8:600", "/volumes/kubernetes.io~configmap/cfg/o=o:utf8:400"])
    ],
    ["a missing ConfigMap", { name: "cfg", configMap: { name: "nope" } }, Either.left('MountVolume.SetUp failed for volume "cfg" : configmap "nope" not found')],
    ["a missing optional ConfigMap: an empty volume", { name: "cfg", configMap: { name: "nope", optional: true } }, Either.right([])],
    [
      "a missing key",
      { name: "cfg", configMap: { name: "cfg", items: [{ key: "nope", path: "x" }] } },
      Either.left('MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nope')
    ],
    ["a Secret (kept base64, 0400 by default)", { name: "s", secret: { secretName: "creds" } }, Either.right([`/volumes/kubernetes.io~secret/s/password=${btoa("pw")}:base64:400`])],
    ["a Secret's defaultMode", { name: "s", secret: { secretName: "creds", defaultMode: 0o440 } }, Either.right([`/volumes/kubernetes.io~secret/s/password=${btoa("pw")}:base64:440`])],
    ["a Secret item's mode", { name: "s", secret: { secretName: "creds", defaultMode: 0o440, items: [{ key: "password", path: "pw", mode: 0o600 }] } }, Either.right([`/volumes/kubernetes.io~secret/s/pw=${btoa("pw")}:base64:600`])],
    ["a missing Secret", { name: "s", secret: { secretName: "nope" } }, Either.left('MountVolume.SetUp failed for volume "s" : secret "nope" not found')],
    [
      "a projected volume: token, ConfigMap key, downward API",
      {
        name: "api",
        projected: {
          sources: [
            { serviceAccountToken: { path: "token", audience: "fleet" } },
            { configMap: { name: "cfg", items: [{ key: "other", path: "ca.crt" }] } },
            { downwardAPI: { items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }] } }
          ]
        }
      },
      Either.right([
        "/volumes/kubernetes.io~projected/api/token=token-for-fleet:utf8:644",
        "/volumes/kubernetes.io~projected/api/ca.crt=o:utf8:644",
        "/volumes/kubernetes.io~projected/api/namespace=default:utf8:644"
      ])
    ],
    ["a downwardAPI volume", { name: "info", downwardAPI: { items: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] } }, Either.right(['/volumes/kubernetes.io~downward-api/info/labels=app="web":utf8:644'])]
  ]
  it.each(fileCases)("files: %s", (_name, volume, want) => {
    expect(files(pod([volume]))).toEqual(want)
  })

  const claimCases: ReadonlyArray<[string, string, string]> = [
    ["a missing claim", "nope", 'persistentvolumeclaim "nope" not found'],
    ["an unbound claim", "pending", 'persistentvolumeclaim "pending" is not bound']
  ]
  it.each(claimCases)("claims: %s", (_name, claimName, want) => {
    expect(plan(pod([{ name: "d", persistentVolumeClaim: { claimName } }]))).toEqual(Either.left(want))
  })

  it("refuses a subPath that climbs out", () => {
    expect(Either.isLeft(plan(pod([{ name: "x", emptyDir: {} }], [{ name: "x", mountPath: "/x", subPath: "../etc" }])))).toBe(true)
  })

  describe("placement and ownership", () => {
    const runAs = (p: Pod.Pod, pod: typeof Pod.PodSecurityContext.Type, ...containers: ReadonlyArray<number | undefined>): Pod.Pod => ({
      ...p,
      spec: {
        ...p.spec,
        securityContext: pod,
        containers: containers.map((uid, i) => ({ name: `c${i}`, image: "i", ...(uid === undefined ? {} : { securityContext: { runAsUser: uid } }) }))
      }
    })
    const volumes: ReadonlyArray<Pod.Volume> = [
      { name: "s", secret: { secretName: "creds" } },
      { name: "cfg", configMap: { name: "cfg", items: [{ key: "other", path: "o" }] } },
      { name: "api", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } }
    ]
    const placed = (p: Pod.Pod, allocatedUid?: number) =>
      Either.getOrThrow(VolumePlan.plan(p, lookup, dir, context, { memoryDir: "/dev/shm/fleet", identity: VolumePlan.identityOf(p, allocatedUid) })).sources.map((s) =>
        s._tag === "Files" ? { path: s.path, owner: s.owner, modes: s.files.map((f) => f.mode.toString(8)) } : s.path
      )

    it("puts Secret and projected volumes in the memory directory, owned by the pod's uid, 0400", () => {
      expect(placed(runAs(pod(volumes), { runAsUser: 1000 }, undefined))).toEqual([
        { path: "/dev/shm/fleet/pods/u1/volumes/kubernetes.io~secret/s", owner: { uid: 1000 }, modes: ["400"] },
        { path: "/var/lib/fleet/pods/u1/volumes/kubernetes.io~configmap/cfg", owner: undefined, modes: ["644"] },
        { path: "/dev/shm/fleet/pods/u1/volumes/kubernetes.io~projected/api", owner: { uid: 1000 }, modes: ["644"] }
      ])
    })

    it("takes the uid the runtime allocated when the pod names none, and gives the fsGroup read (0440)", () => {
      expect(placed(runAs(pod(volumes), { fsGroup: 2000 }, undefined), 200_001)[0]).toEqual({ path: "/dev/shm/fleet/pods/u1/volumes/kubernetes.io~secret/s", owner: { uid: 200_001, gid: 2000 }, modes: ["440"] })
    })

    it("makes Secret files 0444 when the pod's containers run as several uids and no fsGroup reads them", () => {
      expect(placed(runAs(pod(volumes), {}, 1000, 1001))[0]).toEqual({ path: "/dev/shm/fleet/pods/u1/volumes/kubernetes.io~secret/s", owner: undefined, modes: ["444"] })
    })

    it("leaves root's pods' files root's, 0400", () => {
      expect(placed(runAs(pod(volumes), {}, undefined))[0]).toEqual({ path: "/dev/shm/fleet/pods/u1/volumes/kubernetes.io~secret/s", owner: undefined, modes: ["400"] })
    })
  })

  it("lists the objects to fetch", () => {
    const p = pod([
      { name: "cfg", configMap: { name: "cfg" } },
      { name: "d", persistentVolumeClaim: { claimName: "data" } },
      { name: "api", projected: { sources: [{ serviceAccountToken: { path: "token" } }, { secret: { name: "creds" } }] } }
    ])
    expect(VolumePlan.references(p)).toEqual({ configMaps: ["cfg"], secrets: ["creds"], claims: ["data"], tokens: [{ serviceAccountName: "builder", audience: "", expirationSeconds: 3607 }] })
  })
})
