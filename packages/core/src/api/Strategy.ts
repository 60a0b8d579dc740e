/**
 * The vocabulary of a kind's behaviour in the API: its `Strategy` (defaults, create and update
 * rules), its Table columns and its `/scale` subresource. The registry and the built-in
 * strategies both speak it, so it lives apart from either (neither imports the other's module).
 */
import type * as FieldError from "../model/FieldError.js"
import type { JsonObject } from "../object/Json.js"

/** Where a `/scale` subresource finds its numbers (dotted paths into the object). */
export interface ScaleSpec {
  readonly specReplicasPath: string
  readonly statusReplicasPath: string
  readonly labelSelectorPath: string | undefined
}

/** Kind-specific behaviour on create, update and delete. */
export interface Strategy {
  /** Fill defaults (pure, idempotent). Runs on create and update, after decoding. */
  readonly defaults: (object: JsonObject) => JsonObject
  /** Prepare a new object: e.g. reset status, set initial status. */
  readonly prepareForCreate: (object: JsonObject) => JsonObject
  /** Prepare an update of the main resource from the old object (values it keeps unless changed). Optional. */
  readonly prepareForUpdate?: (object: JsonObject, old: JsonObject) => JsonObject
  /** Rules every stored state must keep beyond the schema, as field errors (create and update). */
  readonly validate: (object: JsonObject) => ReadonlyArray<FieldError.FieldError>
  /** Rules an update must keep (immutable fields), as field errors. */
  readonly validateUpdate: (object: JsonObject, old: JsonObject) => ReadonlyArray<FieldError.FieldError>
  /** Whether `metadata.generation` tracks `spec` changes. */
  readonly tracksGeneration: boolean
  /** Whether a successful immediate DELETE answers with the object (else a Success Status). */
  readonly deleteReturnsObject: boolean
}

/** The column of a Table response (`kubectl get`). */
export interface PrinterColumn {
  readonly name: string
  readonly type: "string" | "integer" | "number" | "boolean" | "date"
  /** A dotted path (`.spec.replicas`) or a function of the object. */
  readonly value: string | ((object: JsonObject) => unknown)
  readonly description?: string
  readonly priority?: number
}

/**
 * One API group's built-in kinds, as kube-apiserver's `pkg/registry/<group>` holds them:
 * strategies by `apiVersion/kind`; printer columns, subresources and categories by kind.
 */
export interface GroupStrategies {
  readonly strategies: Readonly<Record<string, Strategy>>
  readonly columns: Readonly<Record<string, ReadonlyArray<PrinterColumn>>>
  /** Kinds with a `/status` subresource. */
  readonly withStatus: ReadonlyArray<string>
  /** Kinds with a `/scale` subresource. */
  readonly scale: Readonly<Record<string, ScaleSpec>>
  /** Kinds in the `all` category (`kubectl get all`). */
  readonly inAll: ReadonlyArray<string>
}
