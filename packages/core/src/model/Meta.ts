/**
 * The metadata every object carries (DESIGN §3): `TypeMeta`, `ObjectMeta`, `ListMeta`, the
 * `List` envelope, references between objects, and the geo-readiness region label.
 */
import { Schema } from "effect"
import { details, optional, StringMap } from "./internal/fields.js"
import { Int64, Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** `apiVersion` and `kind`; optional here because this is also used to peek at untrusted bodies. */
export const TypeMeta = Schema.Struct({
  apiVersion: optional(Schema.String),
  kind: optional(Schema.String)
})

/** `apiVersion` and `kind`. */
export type TypeMeta = typeof TypeMeta.Type

/** A label map whose keys and values follow Kubernetes' label syntax. */
export const Labels = StringMap.pipe(
  Schema.filter((labels) => details(Validation.validateLabels(labels, "").map((e) => e.message)))
)

/** An annotation map: qualified-name keys, at most 256 KiB in total. */
export const Annotations = StringMap.pipe(
  Schema.filter((annotations) => details(Validation.validateAnnotations(annotations, "").map((e) => e.message)))
)

/** A namespace name: a DNS-1123 label. */
export const NamespaceName = Schema.String.pipe(Schema.filter((n) => details(Validation.isDNS1123Label(n))))

/** A reference from a dependent to its owner; garbage collection follows these. */
export const OwnerReference = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  uid: Schema.String,
  controller: optional(Schema.Boolean),
  blockOwnerDeletion: optional(Schema.Boolean)
})

/** A reference from a dependent to its owner. */
export type OwnerReference = typeof OwnerReference.Type

/**
 * Builds `ObjectMeta` with a kind-specific name rule: most kinds use DNS-1123 subdomains,
 * namespaces DNS-1123 labels, services DNS-1035 labels. Every field is optional because the
 * server fills uid, resourceVersion, timestamps, and a name from `generateName`.
 */
/** One entry of `managedFields`: who owns which fields (server-side apply; api/ServerSideApply.ts). */
export const ManagedFieldsEntry = Schema.Struct({
  manager: optional(Schema.String),
  operation: optional(Schema.String),
  apiVersion: optional(Schema.String),
  time: optional(Schema.String),
  fieldsType: optional(Schema.String),
  fieldsV1: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  subresource: optional(Schema.String)
})

export const makeObjectMeta = (isValidName: (name: string) => ReadonlyArray<string>) =>
  Schema.Struct({
    name: optional(Schema.String.pipe(Schema.filter((n) => details(isValidName(n))))),
    generateName: optional(Schema.String),
    namespace: optional(NamespaceName),
    uid: optional(Schema.String),
    resourceVersion: optional(Schema.String),
    generation: optional(Int64),
    creationTimestamp: optional(Time),
    deletionTimestamp: optional(Time),
    deletionGracePeriodSeconds: optional(Int64),
    labels: optional(Labels),
    annotations: optional(Annotations),
    ownerReferences: optional(Schema.Array(OwnerReference)),
    finalizers: optional(Schema.Array(Schema.String)),
    managedFields: optional(Schema.Array(ManagedFieldsEntry))
  })

/** Standard object metadata, with the name a DNS-1123 subdomain. */
export const ObjectMeta = makeObjectMeta(Validation.isDNS1123Subdomain)

/** Standard object metadata. */
export type ObjectMeta = typeof ObjectMeta.Type

/** List metadata: the revision the list was read at and the pagination cursor. */
export const ListMeta = Schema.Struct({
  resourceVersion: optional(Schema.String),
  continue: optional(Schema.String),
  remainingItemCount: optional(Int64)
})

/** List metadata. */
export type ListMeta = typeof ListMeta.Type

/** The `XxxList` envelope returned by list calls, for any item schema. */
export const List = <S extends Schema.Schema.Any>(item: S) =>
  Schema.Struct({
    apiVersion: Schema.String,
    kind: Schema.String,
    metadata: ListMeta,
    items: Schema.Array(item)
  })

/** A reference to any object, optionally to a field inside it (events, endpoints). */
export const ObjectReference = Schema.Struct({
  kind: optional(Schema.String),
  namespace: optional(Schema.String),
  name: optional(Schema.String),
  uid: optional(Schema.String),
  apiVersion: optional(Schema.String),
  resourceVersion: optional(Schema.String),
  fieldPath: optional(Schema.String)
})

/** A reference to any object. */
export type ObjectReference = typeof ObjectReference.Type

/** A reference to an object in the same namespace by name only (e.g. `imagePullSecrets`). */
export const LocalObjectReference = Schema.Struct({ name: optional(Schema.String) })

/** A same-namespace reference by name. */
export type LocalObjectReference = typeof LocalObjectReference.Type

/** The tri-state status of a condition. */
export const ConditionStatus = Schema.Literal("True", "False", "Unknown")

/** The tri-state status of a condition. */
export type ConditionStatus = typeof ConditionStatus.Type

/** The label naming the region that owns an object (DESIGN §3, geo-readiness). */
export const RegionLabel = "fleet.koder.dev/region"

/** The region a server uses when none is configured (`--region`). */
export const DefaultRegion = "local"

/** The object's region label, if set. */
export const regionOf = (meta: { readonly labels?: Readonly<Record<string, string>> }): string | undefined =>
  meta.labels?.[RegionLabel]

/**
 * Sets the region label when absent and never overwrites it: an object created in, or
 * replicated from, another region keeps its origin. Returns `meta` itself when unchanged.
 */
export const withRegionDefault = <M extends { readonly labels?: Readonly<Record<string, string>> }>(
  meta: M,
  region: string = DefaultRegion
): M => (regionOf(meta) !== undefined ? meta : { ...meta, labels: { ...meta.labels, [RegionLabel]: region } })

/**
 * Whether an update changed or removed the region label, which is immutable once set. Compare
 * the stored metadata with the incoming metadata before any defaulting of the incoming object,
 * so that an update omitting the label counts as a removal rather than being silently healed.
 */
export const regionChanged = (
  oldMeta: { readonly labels?: Readonly<Record<string, string>> },
  newMeta: { readonly labels?: Readonly<Record<string, string>> }
): boolean => regionOf(oldMeta) !== regionOf(newMeta)
