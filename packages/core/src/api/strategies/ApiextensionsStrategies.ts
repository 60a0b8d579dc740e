/**
 * The `apiextensions.k8s.io` group (`apiextensions-apiserver/pkg/registry`): a CRD's name must
 * be `plural.group` with exactly one storage version; on create it gets the cleanup finalizer and
 * is accepted and established at once; its scope may not change.
 */
import * as FieldError from "../../model/FieldError.js"
import { asArray, asObject, type JsonObject } from "../../object/Json.js"
import * as Metadata from "../../object/Metadata.js"
import type { GroupStrategies } from "../Strategy.js"
import { immutable, neutral, objectAt } from "./Rules.js"

// The same finalizer as `Crd.cleanupFinalizer`; Crd.ts builds on this registry, so it is not imported.
const crdCleanup = "customresourcecleanup.apiextensions.k8s.io"

const isStorage = (v: unknown) => asObject(v)["storage"] === true

const validateCrd = (o: JsonObject): ReadonlyArray<FieldError.FieldError> => {
  const spec = asObject(o["spec"])
  const names = asObject(spec["names"])
  const want = `${String(names["plural"])}.${String(spec["group"])}`
  const errors: Array<FieldError.FieldError> = []
  const name = Metadata.metadataOf(o)["name"]
  if (name !== want) errors.push(FieldError.invalid("metadata.name", name, `must be spec.names.plural+"."+spec.group`))
  const versions = asArray(spec["versions"])
  if (versions.filter(isStorage).length !== 1) {
    errors.push(FieldError.invalid("spec.versions", versions.length, "must have exactly one version marked as storage version"))
  }
  return errors
}

const prepareCrd = (o: JsonObject): JsonObject => {
  const spec = asObject(o["spec"])
  const m = Metadata.metadataOf(o)
  const finalizers = asArray(m["finalizers"])
  const storage = asArray(spec["versions"]).find(isStorage)
  return {
    ...o,
    metadata: { ...m, finalizers: finalizers.includes(crdCleanup) ? finalizers : [...finalizers, crdCleanup] },
    status: {
      conditions: [
        { type: "NamesAccepted", status: "True", reason: "NoConflicts", message: "no conflicts found" },
        { type: "Established", status: "True", reason: "InitialNamesAccepted", message: "the initial names have been accepted" }
      ],
      acceptedNames: spec["names"],
      storedVersions: storage ? [objectAt(storage)?.["name"]] : []
    }
  }
}

/** The apiextensions group's strategies and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "apiextensions.k8s.io/v1/CustomResourceDefinition": {
      ...neutral,
      validate: validateCrd,
      prepareForCreate: prepareCrd,
      validateUpdate: (o, old) => immutable("spec.scope", objectAt(o["spec"])?.["scope"], objectAt(old["spec"])?.["scope"])
    }
  },
  columns: {},
  withStatus: ["CustomResourceDefinition"],
  scale: {},
  inAll: []
}
