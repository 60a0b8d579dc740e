/**
 * The coordination.k8s.io/v1 `Lease` kind: a lock with a holder and an expiry, used for
 * leader election between control-plane replicas and for node heartbeats.
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { Int32, MicroTime, NonNegativeInt32 } from "./Scalars.js"

/** Who holds the lease, for how long, and since when (timestamps with microseconds). */
export const LeaseSpec = Schema.Struct({
  holderIdentity: optional(Schema.String),
  leaseDurationSeconds: optional(Int32.pipe(Schema.filter((n) => n > 0 || "must be greater than 0"))),
  acquireTime: optional(MicroTime),
  renewTime: optional(MicroTime),
  leaseTransitions: optional(NonNegativeInt32),
  strategy: optional(Schema.String),
  preferredHolder: optional(Schema.String)
})

/** A lease spec. */
export type LeaseSpec = typeof LeaseSpec.Type

/** The `Lease` kind. */
export const Lease = Schema.Struct({
  apiVersion: Schema.Literal("coordination.k8s.io/v1"),
  kind: Schema.Literal("Lease"),
  metadata: ObjectMeta,
  spec: optional(LeaseSpec)
})

/** A Lease object. */
export type Lease = typeof Lease.Type
