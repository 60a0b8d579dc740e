/**
 * The resources the collector works on (upstream's RESTMapper and the GraphBuilder's monitor
 * list): the built-in kinds, plus each CustomResourceDefinition's resource while the CRD exists,
 * found by API group and kind, as an owner reference names them.
 */
import type * as Client from "../../../client/Client.js"
import * as Kinds from "../../../model/Kinds.js"
import { type JsonObject, asArray, asObject } from "../../../object/Json.js"

/** A served resource the collector (and the namespace controller) works on. */
export interface Resource {
  readonly apiVersion: string
  readonly kind: string
  readonly plural: string
  readonly namespaced: boolean
}

/** Every built-in kind as a resource. */
export const builtInResources: ReadonlyArray<Resource> = Kinds.all.map((k) => ({
  apiVersion: k.apiVersion,
  kind: k.kind,
  plural: k.plural,
  namespaced: k.namespaced
}))

/**
 * The resource a CustomResourceDefinition serves (its storage version, else its first served
 * one), or undefined while it is not established or being deleted.
 */
export const crdResource = (crd: JsonObject): Resource | undefined => {
  const spec = asObject(crd["spec"])
  const names = asObject(spec["names"])
  const versions = asArray(spec["versions"]).map(asObject)
  const version = versions.find((v) => v["storage"] === true && v["served"] !== false) ?? versions.find((v) => v["served"] !== false)
  if (version === undefined || typeof spec["group"] !== "string" || typeof names["plural"] !== "string" || typeof names["kind"] !== "string") return undefined
  return { apiVersion: `${spec["group"]}/${String(version["name"])}`, kind: names["kind"], plural: names["plural"], namespaced: spec["scope"] !== "Cluster" }
}

/** The group of an apiVersion (`""` for the core group). */
export const groupOf = (apiVersion: string): string => (apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "")

/** A resource's group and kind (`apps/Deployment`, `/Pod`): what an owner reference resolves by. */
export const groupKindOf = (r: Pick<Resource, "apiVersion" | "kind">): string => `${groupOf(r.apiVersion)}/${r.kind}`

/** The served resources, built-in and custom, by group and kind. */
export interface ResourceTable {
  readonly all: () => ReadonlyArray<Resource>
  readonly byGroupKind: (group: string, kind: string) => Resource | undefined
  readonly add: (r: Resource) => void
  readonly remove: (r: Resource) => void
}

/** A table holding `initial`; custom resources are added and removed as their CRDs come and go. */
export const make = (initial: ReadonlyArray<Resource>): ResourceTable => {
  const byKey = new Map<string, Resource>()
  for (const r of initial) byKey.set(groupKindOf(r), r)
  return {
    all: () => [...byKey.values()],
    byGroupKind: (g, kind) => byKey.get(`${g}/${kind}`),
    add: (r) => void byKey.set(groupKindOf(r), r),
    remove: (r) => void byKey.delete(groupKindOf(r))
  }
}

/** The client's (and informers') reference to a resource. */
export const refOf = (r: Resource): Client.ResourceRef => ({ apiVersion: r.apiVersion, kind: r.kind, plural: r.plural, namespaced: r.namespaced })
