/**
 * The resource model: one effect/Schema module per kind family plus the shared metadata,
 * quantities, selectors, field errors and decoding. Import a module as a namespace
 * (`Pod.Pod`, `Quantity.parse`, `LabelSelector.matches`).
 */
export * as Apps from "./Apps.js"
export * as Authorization from "./Authorization.js"
export * as Config from "./Config.js"
export * as CustomResourceDefinition from "./CustomResourceDefinition.js"
export * as Decode from "./Decode.js"
export * as Event from "./Event.js"
export * as FieldError from "./FieldError.js"
export * as IntOrString from "./IntOrString.js"
export * as Kinds from "./Kinds.js"
export * as LabelSelector from "./LabelSelector.js"
export * as Lease from "./Lease.js"
export * as Meta from "./Meta.js"
export * as Namespace from "./Namespace.js"
export * as Node from "./Node.js"
export * as Pod from "./Pod.js"
export * as Policy from "./Policy.js"
export * as Quantity from "./Quantity.js"
export * as Rbac from "./Rbac.js"
export * as Scalars from "./Scalars.js"
export * as Service from "./Service.js"
export * as ServiceAccount from "./ServiceAccount.js"
export * as Status from "./Status.js"
export * as Validation from "./Validation.js"
