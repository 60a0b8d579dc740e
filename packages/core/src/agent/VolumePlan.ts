/**
 * What a pod's volumes are on this host, as a plan the agent hands to the `VolumeWriter` and to
 * the runtime: a pure function of the pod and the objects it refers to. Layout follows the
 * kubelet's, under the pod's directory (`<dataDir>/pods/<uid>`):
 *
 *   emptyDir               volumes/kubernetes.io~empty-dir/<name>     created empty, removed with the pod
 *   configMap, secret,     volumes/kubernetes.io~<kind>/<name>        projected files (each key, or the
 *   projected, downwardAPI                                          `items`, with `defaultMode`/`mode`),
 *                                                                   rewritten atomically when data changes
 *   hostPath               the path itself (checked/created per its `type`)
 *   persistentVolumeClaim  the bound PersistentVolume's `local.path` (or `hostPath.path`); a
 *                          local-path volume's directory is made 0777 on first use
 *
 * Each container's `volumeMounts` become runtime mounts (`subPath` appended to the source). A
 * missing ConfigMap, Secret, key or claim that is not optional is an error with the kubelet's
 * message; the pod's containers then wait (`ContainerCreating`) and the agent retries.
 *
 * Secret and projected volumes (Secret values, ServiceAccount tokens) go under the `memoryDir` of
 * `Placement` when the node gives one (a directory on tmpfs: they never reach a disk), with the
 * same layout. Their files belong to the pod's user (`identity`): owned by the uid its containers
 * run as, group `fsGroup` when set (the mode then also gets group read, 0440, as the kubelet does);
 * a Secret file's default mode is 0400 (Kubernetes' is 0644: here the owner is the pod's user),
 * 0444 when the pod's containers run as several uids and no `fsGroup` says which group reads.
 * emptyDir and local-path volumes are given to the `fsGroup` (group-owned, group-writable,
 * setgid directories), as the kubelet's volume ownership management does.
 *
 * Departures: `subPathExpr`, `mountPropagation` and `emptyDir.medium: Memory` (tmpfs) are not
 * honoured; `sizeLimit` is not enforced.
 */
import { Either } from "effect"
import type * as Pod from "../model/Pod.js"
import type * as Volume from "../model/Volume.js"
import * as Storage from "../model/Storage.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as ContainerEnv from "./ContainerEnv.js"

/** One projected file: a path relative to the volume's directory, its content and mode. */
export interface File {
  readonly path: string
  readonly data: string
  readonly encoding: "utf8" | "base64"
  readonly mode: number
}

/** One volume of the pod, as the writer sets it up. */
export type Source =
  | { readonly _tag: "EmptyDir"; readonly name: string; readonly path: string; readonly group?: number }
  | {
      readonly _tag: "HostPath"
      readonly name: string
      readonly path: string
      readonly type: string
      /** The mode a directory it creates gets (local-path volumes: 0777, as k3s's helper makes them). */
      readonly createMode?: number
      /** The pod's fsGroup, given the volume's files (volumes that support ownership: local-path). */
      readonly group?: number
    }
  | { readonly _tag: "Files"; readonly name: string; readonly path: string; readonly files: ReadonlyArray<File>; readonly owner?: Owner }

/** Who a volume's files belong to (absent fields: the writer's own user, root on a root node). */
export interface Owner {
  readonly uid?: number
  readonly gid?: number
}

/** Who the pod's processes run as, for its volumes' files. */
export interface Identity {
  /** The one uid every container of the pod runs as; undefined: root, or several uids. */
  readonly uid?: number
  /** The pod's containers run as more than one uid. */
  readonly mixed: boolean
  readonly fsGroup?: number
}

/** Where a pod's volumes are placed and whose they are. */
export interface Placement {
  /** The node's memory-backed directory for Secret and projected volumes (their `podDir` under it). */
  readonly memoryDir?: string
  readonly identity?: Identity
}

/** The default mode of Secret volume files with one owner (0400). */
export const secretDefaultMode = 0o400

/**
 * The identity of `pod`'s processes: each container's `runAsUser` (its own, else the pod's), else
 * `allocatedUid` (the uid the runtime gave the pod, if any), else root.
 */
export const identityOf = (pod: Pod.Pod, allocatedUid?: number): Identity => {
  const uids = new Set(
    [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.securityContext?.runAsUser ?? pod.spec.securityContext?.runAsUser ?? allocatedUid ?? 0)
  )
  const fsGroup = pod.spec.securityContext?.fsGroup
  const only = uids.size === 1 ? [...uids][0] : undefined
  return { ...(only === undefined || only === 0 ? {} : { uid: only }), mixed: uids.size > 1, ...(fsGroup === undefined ? {} : { fsGroup }) }
}

/** The volumes of a pod and where each container sees them. */
export interface Plan {
  readonly sources: ReadonlyArray<Source>
  /** Runtime mounts by container name. */
  readonly mounts: ReadonlyMap<string, ReadonlyArray<Runtime.Mount>>
}

/** A service account token a projected volume needs. */
export interface TokenRequest {
  readonly serviceAccountName: string
  readonly audience: string
  readonly expirationSeconds: number
}

/** The objects a pod's volumes and environment refer to (for the agent to fetch). */
export interface References {
  readonly configMaps: ReadonlyArray<string>
  readonly secrets: ReadonlyArray<string>
  readonly claims: ReadonlyArray<string>
  readonly tokens: ReadonlyArray<TokenRequest>
}

/** What the plan is made from, besides the pod. */
export interface Lookup extends ContainerEnv.Lookup {
  readonly claim: (name: string) => Volume.PersistentVolumeClaim | undefined
  /** A PersistentVolume by name. */
  readonly volume: (name: string) => Volume.PersistentVolume | undefined
  /** A token for a projected `serviceAccountToken` source (undefined: could not be had). */
  readonly token: (request: TokenRequest) => string | undefined
}

/** The default file mode of projected files (0644). */
export const defaultMode = 0o644

/** The directory of a pod's files under the agent's data dir. */
export const podDir = (dataDir: string, uid: string): string => `${dataDir.replace(/\/+$/, "")}/pods/${uid}`

const kindDir: Record<string, string> = {
  emptyDir: "kubernetes.io~empty-dir",
  configMap: "kubernetes.io~configmap",
  secret: "kubernetes.io~secret",
  projected: "kubernetes.io~projected",
  downwardAPI: "kubernetes.io~downward-api"
}

const volumePath = (dir: string, kind: string, name: string) => `${dir}/volumes/${kindDir[kind]}/${name}`

const defaultTokenSeconds = 3607

/** Everything the pod's volumes and containers' environment refer to. */
export const references = (pod: Pod.Pod): References => {
  const configMaps = new Set<string>()
  const secrets = new Set<string>()
  const claims = new Set<string>()
  const tokens: Array<TokenRequest> = []
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    const r = ContainerEnv.references(c)
    r.configMaps.forEach((n) => configMaps.add(n))
    r.secrets.forEach((n) => secrets.add(n))
  }
  // Fetched with the rest so a pull finds its credentials in the same lookup.
  for (const r of pod.spec.imagePullSecrets ?? []) if (r.name) secrets.add(r.name)
  for (const v of pod.spec.volumes ?? []) {
    if (v.configMap?.name) configMaps.add(v.configMap.name)
    if (v.secret?.secretName) secrets.add(v.secret.secretName)
    if (v.persistentVolumeClaim) claims.add(v.persistentVolumeClaim.claimName)
    for (const s of v.projected?.sources ?? []) {
      if (s.configMap?.name) configMaps.add(s.configMap.name)
      if (s.secret?.name) secrets.add(s.secret.name)
      if (s.serviceAccountToken) {
        tokens.push({ serviceAccountName: pod.spec.serviceAccountName ?? "default", audience: s.serviceAccountToken.audience ?? "", expirationSeconds: s.serviceAccountToken.expirationSeconds ?? defaultTokenSeconds })
      }
    }
  }
  return { configMaps: [...configMaps], secrets: [...secrets], claims: [...claims], tokens }
}

type Items = ReadonlyArray<typeof Pod.KeyToPath.Type> | undefined

// The files of a ConfigMap or Secret: every key, or the listed items.
const keyFiles = (
  data: ReadonlyArray<readonly [string, string, "utf8" | "base64"]>,
  items: Items,
  mode: number,
  missing: (key: string) => string
): Either.Either<ReadonlyArray<File>, string> => {
  if (items === undefined || items.length === 0) return Either.right(data.map(([key, value, encoding]) => ({ path: key, data: value, encoding, mode })))
  const out: Array<File> = []
  for (const item of items) {
    const found = data.find(([key]) => key === item.key)
    if (found === undefined) return Either.left(missing(item.key))
    out.push({ path: item.path, data: found[1], encoding: found[2], mode: item.mode ?? mode })
  }
  return Either.right(out)
}

const configMapData = (cm: { readonly data?: Readonly<Record<string, string>>; readonly binaryData?: Readonly<Record<string, string>> }) => [
  ...Object.entries(cm.data ?? {}).map(([k, v]) => [k, v, "utf8"] as const),
  ...Object.entries(cm.binaryData ?? {}).map(([k, v]) => [k, v, "base64"] as const)
]

const secretData = (s: { readonly data?: Readonly<Record<string, string>> }) => Object.entries(s.data ?? {}).map(([k, v]) => [k, v, "base64"] as const)

const configMapFiles = (lookup: Lookup, name: string, items: Items, mode: number, optional: boolean): Either.Either<ReadonlyArray<File>, string> => {
  const cm = lookup.configMap(name)
  if (cm === undefined) return optional ? Either.right([]) : Either.left(`configmap "${name}" not found`)
  return keyFiles(configMapData(cm), items, mode, (key) => `configmap references non-existent config key: ${key}`)
}

const secretFiles = (lookup: Lookup, name: string, items: Items, mode: number, optional: boolean): Either.Either<ReadonlyArray<File>, string> => {
  const secret = lookup.secret(name)
  if (secret === undefined) return optional ? Either.right([]) : Either.left(`secret "${name}" not found`)
  return keyFiles(secretData(secret), items, mode, (key) => `references non-existent secret key: ${key}`)
}

const downwardFiles = (
  pod: Pod.Pod,
  items: ReadonlyArray<typeof Pod.DownwardAPIVolumeFile.Type>,
  mode: number,
  context: Pick<ContainerEnv.Context, "hostIP" | "podIP" | "nodeAllocatable">
): Either.Either<ReadonlyArray<File>, string> => {
  const out: Array<File> = []
  for (const item of items) {
    let value: string | undefined
    if (item.fieldRef !== undefined) value = ContainerEnv.fieldValue(pod, item.fieldRef.fieldPath, context)
    else if (item.resourceFieldRef !== undefined) {
      const container = pod.spec.containers.find((c) => c.name === item.resourceFieldRef!.containerName) ?? pod.spec.containers[0]!
      value = ContainerEnv.resourceValue(pod, container, item.resourceFieldRef, context.nodeAllocatable)
    }
    if (value === undefined) return Either.left(`unsupported downward API item: ${item.path}`)
    out.push({ path: item.path, data: value, encoding: "utf8", mode: item.mode ?? mode })
  }
  return Either.right(out)
}

// A private volume's files: the owner's, and the fsGroup's to read when there is one.
const owned = (files: ReadonlyArray<File>, identity: Identity | undefined): ReadonlyArray<File> =>
  identity?.fsGroup === undefined ? files : files.map((f) => ({ ...f, mode: f.mode | 0o440 }))

const ownerOf = (identity: Identity | undefined): Owner | undefined =>
  identity === undefined || (identity.uid === undefined && identity.fsGroup === undefined)
    ? undefined
    : { ...(identity.uid === undefined ? {} : { uid: identity.uid }), ...(identity.fsGroup === undefined ? {} : { gid: identity.fsGroup }) }

const source = (
  pod: Pod.Pod,
  v: Pod.Volume,
  lookup: Lookup,
  dir: string,
  context: Pick<ContainerEnv.Context, "hostIP" | "podIP" | "nodeAllocatable">,
  placement: Placement
): Either.Either<Source, string> => {
  const failed = (message: string) => Either.left(`MountVolume.SetUp failed for volume "${v.name}" : ${message}`)
  const identity = placement.identity
  // Secrets and tokens: in memory when the node has a place for it, and the pod's user's.
  const memoryDir = placement.memoryDir === undefined ? dir : podDir(placement.memoryDir, pod.metadata.uid ?? "")
  const files = (kind: string, result: Either.Either<ReadonlyArray<File>, string>): Either.Either<Source, string> => {
    if (Either.isLeft(result)) return failed(result.left)
    if (kind !== "secret" && kind !== "projected") return Either.right({ _tag: "Files", name: v.name, path: volumePath(dir, kind, v.name), files: result.right })
    const owner = ownerOf(identity)
    return Either.right({ _tag: "Files", name: v.name, path: volumePath(memoryDir, kind, v.name), files: owned(result.right, identity), ...(owner === undefined ? {} : { owner }) })
  }
  if (v.hostPath !== undefined) return Either.right({ _tag: "HostPath", name: v.name, path: v.hostPath.path, type: v.hostPath.type ?? "" })
  if (v.configMap !== undefined) {
    return files("configMap", configMapFiles(lookup, v.configMap.name ?? "", v.configMap.items, v.configMap.defaultMode ?? defaultMode, v.configMap.optional === true))
  }
  if (v.secret !== undefined) {
    const mode = v.secret.defaultMode ?? (identity?.mixed === true && identity.fsGroup === undefined ? 0o444 : secretDefaultMode)
    return files("secret", secretFiles(lookup, v.secret.secretName ?? "", v.secret.items, mode, v.secret.optional === true))
  }
  if (v.downwardAPI !== undefined) return files("downwardAPI", downwardFiles(pod, v.downwardAPI.items ?? [], v.downwardAPI.defaultMode ?? defaultMode, context))
  if (v.projected !== undefined) {
    const mode = v.projected.defaultMode ?? defaultMode
    const all: Array<File> = []
    for (const s of v.projected.sources ?? []) {
      let part: Either.Either<ReadonlyArray<File>, string> = Either.right([])
      if (s.configMap !== undefined) part = configMapFiles(lookup, s.configMap.name ?? "", s.configMap.items, mode, s.configMap.optional === true)
      else if (s.secret !== undefined) part = secretFiles(lookup, s.secret.name ?? "", s.secret.items, mode, s.secret.optional === true)
      else if (s.downwardAPI !== undefined) part = downwardFiles(pod, s.downwardAPI.items ?? [], mode, context)
      else if (s.serviceAccountToken !== undefined) {
        const request = { serviceAccountName: pod.spec.serviceAccountName ?? "default", audience: s.serviceAccountToken.audience ?? "", expirationSeconds: s.serviceAccountToken.expirationSeconds ?? defaultTokenSeconds }
        const token = lookup.token(request)
        part = token === undefined ? Either.left(`failed to fetch token: serviceaccount "${request.serviceAccountName}"`) : Either.right([{ path: s.serviceAccountToken.path, data: token, encoding: "utf8", mode }])
      }
      if (Either.isLeft(part)) return failed(part.left)
      all.push(...part.right)
    }
    return files("projected", Either.right(all))
  }
  if (v.persistentVolumeClaim !== undefined) {
    const name = v.persistentVolumeClaim.claimName
    const claim = lookup.claim(name)
    if (claim === undefined) return Either.left(`persistentvolumeclaim "${name}" not found`)
    const volumeName = claim.spec.volumeName ?? ""
    if (volumeName === "" || claim.status?.phase !== "Bound") return Either.left(`persistentvolumeclaim "${name}" is not bound`)
    const pv = lookup.volume(volumeName)
    const path = pv?.spec.local?.path ?? pv?.spec.hostPath?.path
    if (path === undefined) return failed(`persistentvolume "${volumeName}" is not a local volume`)
    const local = pv?.metadata.annotations?.[Storage.ProvisionedByAnnotation] === Storage.LocalPathProvisioner
    const group = local ? identity?.fsGroup : undefined
    return Either.right({
      _tag: "HostPath",
      name: v.name,
      path,
      type: pv?.spec.hostPath?.type ?? "Directory",
      ...(local ? { createMode: 0o777 } : {}),
      ...(group === undefined ? {} : { group })
    })
  }
  // No source (or emptyDir): scratch space for the pod's life.
  const group = identity?.fsGroup
  return Either.right({ _tag: "EmptyDir", name: v.name, path: volumePath(dir, "emptyDir", v.name), ...(group === undefined ? {} : { group }) })
}

/** The plan of `pod`'s volumes under `dir` (its `podDir`), or the first error. */
export const plan = (
  pod: Pod.Pod,
  lookup: Lookup,
  dir: string,
  context: Pick<ContainerEnv.Context, "hostIP" | "podIP" | "nodeAllocatable">,
  placement: Placement = {}
): Either.Either<Plan, string> => {
  const sources: Array<Source> = []
  for (const v of pod.spec.volumes ?? []) {
    const s = source(pod, v, lookup, dir, context, placement)
    if (Either.isLeft(s)) return Either.left(s.left)
    sources.push(s.right)
  }
  const mounts = new Map<string, ReadonlyArray<Runtime.Mount>>()
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    const list: Array<Runtime.Mount> = []
    for (const m of c.volumeMounts ?? []) {
      const s = sources.find((x) => x.name === m.name)
      if (s === undefined) return Either.left(`container "${c.name}" mounts unknown volume "${m.name}"`)
      const sub = (m.subPath ?? "").replace(/^\/+/, "")
      if (sub.split("/").includes("..")) return Either.left(`subPath "${m.subPath ?? ""}" of volume "${m.name}" must not contain '..'`)
      // Projected files are always read-only, as in Kubernetes.
      const readOnly = m.readOnly === true || s._tag === "Files"
      list.push({ hostPath: sub === "" ? s.path : `${s.path}/${sub}`, containerPath: m.mountPath, ...(readOnly ? { readOnly: true } : {}) })
    }
    mounts.set(c.name, list)
  }
  return Either.right({ sources, mounts })
}

/** `FLEET_VOLUME_<NAME>` variables pointing at each mount's host path, for runtimes without bind mounts. */
export const mountEnv = (container: Pod.Container, plan: Plan): ReadonlyArray<ContainerEnv.EnvVar> => {
  const mounts = plan.mounts.get(container.name) ?? []
  return (container.volumeMounts ?? []).flatMap((m, i) => {
    const mount = mounts[i]
    return mount === undefined ? [] : [{ name: `FLEET_VOLUME_${m.name.toUpperCase().replace(/[^A-Z0-9_]/g, "_")}`, value: mount.hostPath }]
  })
}
