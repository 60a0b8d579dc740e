/**
 * Where objects live in the store. One layout for every backend and every reader, close to
 * kube-apiserver's (`/registry/<resource>/<namespace>/<name>`, with the API group in front of
 * the resource for non-core groups), so a prefix scan lists a resource or one namespace of it.
 */

/** What names one stored object. */
export interface ObjectRef {
  /** API group; "" for the core group (v1). */
  readonly group: string
  /** Plural resource name, e.g. "pods", "leases". */
  readonly resource: string
  /** Namespace; absent for cluster-scoped resources. */
  readonly namespace?: string | undefined
  readonly name: string
}

/** The root of every key Fleet writes. */
export const root = "/registry/"

/** The prefix of a resource, or of one namespace of it when `namespace` is given. */
export const prefix = (group: string, resource: string, namespace?: string): string =>
  `${root}${group === "" ? "" : `${group}/`}${resource}/${namespace === undefined ? "" : `${namespace}/`}`

/** The key of one object. */
export const object = (ref: ObjectRef): string => `${prefix(ref.group, ref.resource, ref.namespace)}${ref.name}`
