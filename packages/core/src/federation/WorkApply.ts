/**
 * How a member applies a Work (pure parts): each manifest is stamped as the member's own — the
 * labels `federation.fleet.koder.dev/work` (the Work's name) and `…/member`, the member's region
 * (`fleet.koder.dev/region`, the hub's region rule), and the Work's generation as an annotation —
 * then server-side applied with the field manager `fleet-member-agent`. What it reports back per
 * manifest: Applied (the apply's outcome) and Available (from the object's status, by kind), with
 * a few status fields as feedback. What leaves the Work is deleted only if it carries this Work's
 * label: a member never touches objects it did not make.
 */
import * as Federation from "../model/Federation.js"
import { RegionLabel } from "../model/Meta.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"

/** The field manager of a member's applies. */
export const FieldManager = "fleet-member-agent"

/** The label naming the Work an object came from. */
export const WorkLabel = `${Federation.Group}/work`

/** The annotation with the Work generation an object was last applied from. */
export const GenerationAnnotation = `${Federation.Group}/work-generation`

/** A manifest's identity. */
export interface Identity {
  readonly ordinal: number
  readonly group: string
  readonly version: string
  readonly kind: string
  readonly namespace?: string
  readonly name: string
}

/** The identity of manifest `ordinal`. */
export const identify = (manifest: JsonObject, ordinal: number): Identity => {
  const apiVersion = asString(manifest["apiVersion"])
  const slash = apiVersion.indexOf("/")
  const m = asObject(manifest["metadata"])
  const namespace = asString(m["namespace"])
  return {
    ordinal,
    group: slash < 0 ? "" : apiVersion.slice(0, slash),
    version: slash < 0 ? apiVersion : apiVersion.slice(slash + 1),
    kind: asString(manifest["kind"]),
    ...(namespace === "" ? {} : { namespace }),
    name: asString(m["name"])
  }
}

/** Same object (ordinal aside). */
export const sameObject = (a: Identity, b: Identity): boolean =>
  a.group === b.group && a.kind === b.kind && (a.namespace ?? "") === (b.namespace ?? "") && a.name === b.name

/** `apiVersion` of an identity. */
export const apiVersionOf = (id: Pick<Identity, "group" | "version">): string => (id.group === "" ? id.version : `${id.group}/${id.version}`)

/** The manifest as the member applies it. */
export const stamp = (manifest: JsonObject, work: { readonly name: string; readonly generation: number }, member: { readonly name: string; readonly region: string }): JsonObject => {
  const m = asObject(manifest["metadata"])
  const { resourceVersion: _rv, uid: _uid, creationTimestamp: _ct, managedFields: _mf, ...meta } = m
  return {
    ...manifest,
    metadata: {
      ...meta,
      labels: { ...asObject(m["labels"]), [WorkLabel]: work.name, [Federation.MemberLabel]: member.name, [RegionLabel]: member.region },
      annotations: { ...asObject(m["annotations"]), [GenerationAnnotation]: String(work.generation) }
    }
  }
}

const num = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined)

/** Whether an applied object is available, and why not (pure, by kind). */
export const availability = (o: JsonObject): { readonly available: boolean; readonly reason: string; readonly message: string } => {
  const kind = asString(o["kind"])
  const spec = asObject(o["spec"])
  const status = asObject(o["status"])
  const generation = num(asObject(o["metadata"])["generation"]) ?? 0
  const observed = num(status["observedGeneration"]) ?? 0
  switch (kind) {
    case "Deployment":
    case "ReplicaSet":
    case "StatefulSet": {
      const want = num(spec["replicas"]) ?? 1
      const have = num(kind === "StatefulSet" ? status["readyReplicas"] : status["availableReplicas"]) ?? 0
      if (observed < generation) return { available: false, reason: "Progressing", message: "the controller has not observed the latest spec" }
      return have >= want ? { available: true, reason: "MinimumReplicasAvailable", message: `${have}/${want} replicas available` } : { available: false, reason: "ReplicasUnavailable", message: `${have}/${want} replicas available` }
    }
    case "DaemonSet": {
      const want = num(status["desiredNumberScheduled"]) ?? 0
      const have = num(status["numberAvailable"]) ?? 0
      return have >= want ? { available: true, reason: "AllPodsAvailable", message: `${have}/${want} pods available` } : { available: false, reason: "PodsUnavailable", message: `${have}/${want} pods available` }
    }
    case "Job": {
      const done = asArray(status["conditions"]).map(asObject).find((c) => (c["type"] === "Complete" || c["type"] === "Failed") && c["status"] === "True")
      if (done?.["type"] === "Failed") return { available: false, reason: "JobFailed", message: asString(done["message"]) }
      return { available: true, reason: done === undefined ? "JobRunning" : "JobComplete", message: "" }
    }
    case "Pod": {
      const ready = asArray(status["conditions"]).map(asObject).some((c) => c["type"] === "Ready" && c["status"] === "True")
      return ready ? { available: true, reason: "PodReady", message: "" } : { available: false, reason: "PodNotReady", message: asString(status["phase"]) }
    }
    default:
      return { available: true, reason: "ResourceExists", message: "" }
  }
}

/** A few status fields worth showing on the hub. */
export const feedback = (o: JsonObject): Record<string, unknown> => {
  const status = asObject(o["status"])
  const out: Record<string, unknown> = {}
  for (const k of ["replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "phase", "succeeded", "failed", "active"]) if (status[k] !== undefined) out[k] = status[k]
  return out
}
