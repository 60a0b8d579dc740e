/**
 * The `Namespace` kind (v1): the scope of namespaced objects. Deleting one moves it to
 * `Terminating` until its finalizers have removed everything inside.
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ConditionStatus, makeObjectMeta } from "./Meta.js"
import { Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** The lifecycle phase of a namespace. */
export const NamespacePhase = Schema.Literal("Active", "Terminating")

/** The lifecycle phase of a namespace. */
export type NamespacePhase = typeof NamespacePhase.Type

/** What the namespace controller must finish before the namespace can go (e.g. `kubernetes`). */
export const NamespaceSpec = Schema.Struct({
  finalizers: optional(Schema.Array(Schema.String))
})

/** Namespace spec. */
export type NamespaceSpec = typeof NamespaceSpec.Type

/** A condition reported while a namespace terminates. */
export const NamespaceCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** Namespace status: its phase. */
export const NamespaceStatus = Schema.Struct({
  phase: optional(NamespacePhase),
  conditions: optional(Schema.Array(NamespaceCondition))
})

/** Namespace status. */
export type NamespaceStatus = typeof NamespaceStatus.Type

/** Namespace metadata: the name is a DNS-1123 label, since it appears inside DNS names. */
export const NamespaceMeta = makeObjectMeta(Validation.isDNS1123Label)

/** The `Namespace` kind. */
export const Namespace = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Namespace"),
  metadata: NamespaceMeta,
  spec: optional(NamespaceSpec),
  status: optional(NamespaceStatus)
})

/** A Namespace object. */
export type Namespace = typeof Namespace.Type
