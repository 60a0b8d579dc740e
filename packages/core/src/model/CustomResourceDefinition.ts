/**
 * The apiextensions.k8s.io/v1 `CustomResourceDefinition` kind: a user-defined resource with its
 * names, scope, versions, OpenAPI v3 schema, subresources and printer columns. The API server
 * serves each served version of an accepted CRD as a new resource (see api/Crd.ts).
 */
import { Schema } from "effect"
import { nonEmptyArray, optional, RequiredString } from "./internal/fields.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { Int32 } from "./Scalars.js"

/** The names a custom resource is known by. */
export const CustomResourceDefinitionNames = Schema.Struct({
  plural: RequiredString,
  singular: optional(Schema.String),
  kind: RequiredString,
  listKind: optional(Schema.String),
  shortNames: optional(Schema.Array(Schema.String)),
  categories: optional(Schema.Array(Schema.String))
})

/** One version of a custom resource. */
export const CustomResourceDefinitionVersion = Schema.Struct({
  name: RequiredString,
  served: Schema.Boolean,
  storage: Schema.Boolean,
  deprecated: optional(Schema.Boolean),
  deprecationWarning: optional(Schema.String),
  schema: optional(Schema.Struct({ openAPIV3Schema: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })) })),
  subresources: optional(
    Schema.Struct({
      status: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
      scale: optional(
        Schema.Struct({
          specReplicasPath: Schema.String,
          statusReplicasPath: Schema.String,
          labelSelectorPath: optional(Schema.String)
        })
      )
    })
  ),
  additionalPrinterColumns: optional(
    Schema.Array(
      Schema.Struct({
        name: RequiredString,
        type: Schema.Literal("integer", "number", "string", "boolean", "date"),
        format: optional(Schema.String),
        description: optional(Schema.String),
        priority: optional(Int32),
        jsonPath: RequiredString
      })
    )
  )
})

/** A CRD's spec. */
export const CustomResourceDefinitionSpec = Schema.Struct({
  group: RequiredString,
  names: CustomResourceDefinitionNames,
  scope: Schema.Literal("Namespaced", "Cluster"),
  versions: nonEmptyArray(CustomResourceDefinitionVersion),
  conversion: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  preserveUnknownFields: optional(Schema.Boolean)
})

/** A CRD's status: whether its names were accepted and it is established. */
export const CustomResourceDefinitionStatus = Schema.Struct({
  conditions: optional(
    Schema.Array(
      Schema.Struct({
        type: Schema.String,
        status: ConditionStatus,
        lastTransitionTime: optional(Schema.String),
        reason: optional(Schema.String),
        message: optional(Schema.String)
      })
    )
  ),
  acceptedNames: optional(CustomResourceDefinitionNames),
  storedVersions: optional(Schema.Array(Schema.String))
})

/** The `CustomResourceDefinition` kind. */
export const CustomResourceDefinition = Schema.Struct({
  apiVersion: Schema.Literal("apiextensions.k8s.io/v1"),
  kind: Schema.Literal("CustomResourceDefinition"),
  metadata: ObjectMeta,
  spec: CustomResourceDefinitionSpec,
  status: optional(CustomResourceDefinitionStatus)
})

/** A CustomResourceDefinition object. */
export type CustomResourceDefinition = typeof CustomResourceDefinition.Type
