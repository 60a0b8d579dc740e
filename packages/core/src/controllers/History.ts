/**
 * ControllerRevision history shared by the StatefulSet and DaemonSet controllers (upstream
 * `pkg/controller/history` and each controller's revision code): a revision stores, as `data`, the
 * strategic merge patch that restores the owner's pod template (`{"spec":{"template":{...,
 * "$patch":"replace"}}}`); it is named `<owner>-<hash>` and labelled `controller-revision-hash:
 * <hash>` (plus the template's labels); its `revision` number grows with every new or rolled-back
 * template; non-live revisions beyond `revisionHistoryLimit` are deleted oldest first.
 *
 * The decisions are pure (`resolve`, `toTruncate`); `ensure` is the one effect, creating a
 * revision and escaping name collisions by bumping the owner's `collisionCount` as upstream does.
 */
import { Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type { JsonObject } from "../informer/Informer.js"
import { asObject, stableJson } from "../object/Json.js"
import { isControlledBy, metadataOf, ownerReference } from "../object/Metadata.js"


/** The label naming the revision a pod (or a revision) belongs to. */
export const HashLabel = "controller-revision-hash"

/** The ControllerRevision resource. */
export const ControllerRevisionRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "ControllerRevision" }

/** Default `revisionHistoryLimit` of StatefulSets and DaemonSets. */
export const defaultHistoryLimit = 10

/** The patch a revision stores: it replaces the owner's `spec.template` wholesale when applied. */
export const patchOf = (owner: JsonObject): JsonObject => ({
  spec: { template: { ...asObject(asObject(owner["spec"])["template"]), $patch: "replace" } }
})

/** The pod template a revision restores (its patch without the `$patch` directive). */
export const templateOf = (revision: JsonObject): JsonObject => {
  const { $patch: _directive, ...template } = asObject(asObject(asObject(revision["data"])["spec"])["template"])
  return template
}

/** Whether two revisions (or a revision and a patch) hold the same data, compared canonically. */
export const sameData = (a: unknown, b: unknown): boolean => stableJson(a) === stableJson(b)

/** A revision's number (0 when unset). */
export const revisionOf = (revision: JsonObject): number => Number(revision["revision"] ?? 0)

/** A revision's hash label, falling back to the suffix of its name. */
export const hashOf = (revision: JsonObject): string => {
  const labelled = asObject(metadataOf(revision)["labels"])[HashLabel]
  if (typeof labelled === "string" && labelled !== "") return labelled
  const name = String(metadataOf(revision)["name"] ?? "")
  return name.slice(name.lastIndexOf("-") + 1)
}

/** Revisions oldest first: by number, then creation time, then name (upstream ordering). */
export const sorted = (revisions: ReadonlyArray<JsonObject>): ReadonlyArray<JsonObject> =>
  [...revisions].sort((a, b) => {
    const d = revisionOf(a) - revisionOf(b)
    if (d !== 0) return d
    const ta = String(metadataOf(a)["creationTimestamp"] ?? "")
    const tb = String(metadataOf(b)["creationTimestamp"] ?? "")
    if (ta !== tb) return ta < tb ? -1 : 1
    return String(metadataOf(a)["name"]).localeCompare(String(metadataOf(b)["name"]))
  })

/** The number the next new revision gets: one more than the largest, or 1. */
export const nextRevision = (revisions: ReadonlyArray<JsonObject>): number =>
  revisions.reduce((max, r) => Math.max(max, revisionOf(r)), 0) + 1

/** `<owner>-<hash>`, the owner name cut so the result stays a valid name (upstream keeps 223 characters). */
export const revisionName = (ownerName: string, hash: string): string => `${ownerName.slice(0, 223)}-${hash}`

/**
 * A new ControllerRevision of `owner` holding `data`, numbered `revision`, named and labelled with
 * `hash`; it copies the template's labels and the owner's annotations, as upstream does.
 */
export const make = (owner: JsonObject, options: { readonly data: JsonObject; readonly revision: number; readonly hash: string }): JsonObject => {
  const m = metadataOf(owner)
  const templateLabels = asObject(asObject(asObject(asObject(owner["spec"])["template"])["metadata"])["labels"])
  const annotations = asObject(m["annotations"])
  return {
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: {
      name: revisionName(String(m["name"]), options.hash),
      namespace: m["namespace"],
      labels: { ...templateLabels, [HashLabel]: options.hash },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ownerReferences: [ownerReference(owner)]
    },
    data: options.data,
    revision: options.revision
  }
}

/**
 * Where the owner's present template stands in its history (upstream `getStatefulSetRevisions`
 * and the DaemonSet's `constructHistory`):
 * - `Existing`: the newest revision already holds it;
 * - `Renumber`: an older revision holds it (a rollback), which becomes the newest by taking the
 *   next number;
 * - `Create`: no revision holds it; a new one gets the next number.
 */
export type Resolution =
  | { readonly _tag: "Existing"; readonly revision: JsonObject }
  | { readonly _tag: "Renumber"; readonly revision: JsonObject; readonly to: number }
  | { readonly _tag: "Create"; readonly number: number }

/** Resolve the revision for `data` among `revisions` (pure). */
export const resolve = (revisions: ReadonlyArray<JsonObject>, data: JsonObject): Resolution => {
  const ordered = sorted(revisions)
  const equal = ordered.filter((r) => sameData(r["data"], data))
  const newest = ordered[ordered.length - 1]
  const match = equal[equal.length - 1]
  if (match === undefined) return { _tag: "Create", number: nextRevision(ordered) }
  if (newest !== undefined && revisionOf(match) === revisionOf(newest)) return { _tag: "Existing", revision: match }
  return { _tag: "Renumber", revision: match, to: nextRevision(ordered) }
}

/**
 * The revisions to delete so that at most `limit` non-live ones remain, oldest first; `live`
 * names the revisions in use (current, update, those pods still carry), which are never deleted.
 */
export const toTruncate = (revisions: ReadonlyArray<JsonObject>, live: ReadonlySet<string>, limit: number): ReadonlyArray<JsonObject> => {
  const history = sorted(revisions).filter((r) => !live.has(String(metadataOf(r)["name"])))
  return limit < 0 || history.length <= limit ? [] : history.slice(0, history.length - limit)
}

const isAlreadyExists = (e: ApiError.ApiError) => e.status.code === 409 && e.status.reason === "AlreadyExists"

/** How many name collisions `ensure` escapes before giving up (a retry then starts again). */
const maxCollisions = 16

/**
 * Apply a resolution: answers the revision holding the template now and the collision count used.
 * `Create` builds the revision with `build(collisionCount)`; when its name is taken by a revision
 * with other data (or another owner), the count is bumped and the name recomputed, as upstream's
 * `CreateControllerRevision`; the caller records the count in the owner's status.
 */
export const ensure = (
  client: Client.Client,
  owner: JsonObject,
  resolution: Resolution,
  build: (collisionCount: number) => JsonObject,
  collisionCount: number
): Effect.Effect<{ readonly revision: JsonObject; readonly collisionCount: number }, ApiError.ApiError> =>
  Effect.gen(function* () {
    if (resolution._tag === "Existing") return { revision: resolution.revision, collisionCount }
    if (resolution._tag === "Renumber") {
      const m = metadataOf(resolution.revision)
      const updated = yield* client.patch(ControllerRevisionRef, m["namespace"] as string | undefined, String(m["name"]), "merge", {
        revision: resolution.to
      })
      return { revision: updated, collisionCount }
    }
    const uid = String(metadataOf(owner)["uid"] ?? "")
    let count = collisionCount
    for (let i = 0; ; i++) {
      const wanted = build(count)
      const created = yield* Effect.either(client.create(wanted))
      if (created._tag === "Right") return { revision: created.right, collisionCount: count }
      if (!isAlreadyExists(created.left) || i >= maxCollisions) return yield* Effect.fail(created.left)
      const m = metadataOf(wanted)
      const existing = yield* client.get(ControllerRevisionRef, m["namespace"] as string | undefined, String(m["name"]))
      if (sameData(existing["data"], wanted["data"]) && isControlledBy(existing, uid)) return { revision: existing, collisionCount: count }
      count++
    }
  })
