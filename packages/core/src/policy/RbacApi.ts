/**
 * The authorization endpoints, installed into a registry: the access and rules reviews
 * (authorization.k8s.io/v1) and scoped namespace discovery (fleet.koder.dev/v1).
 */
import type { StoreService } from "../store/Store.js"
import type { Registry, Resource } from "../api/Registry.js"
import { accessibleNamespaces } from "./AccessibleNamespaces.js"
import type { Evaluator } from "./RbacEvaluator.js"
import { selfSubjectAccessReviews, selfSubjectRulesReviews, subjectAccessReviews } from "./RbacReviews.js"

export * as AccessibleNamespaces from "./AccessibleNamespaces.js"
export * as Evaluator from "./RbacEvaluator.js"
export * as Reviews from "./RbacReviews.js"

/** The virtual resources, answering from `evaluator`. */
export const resources = (evaluator: Evaluator, store: StoreService): ReadonlyArray<Resource> => [
  selfSubjectAccessReviews(evaluator),
  selfSubjectRulesReviews(evaluator),
  subjectAccessReviews(evaluator),
  accessibleNamespaces(evaluator, store)
]

/** Serve them from `registry`. */
export const install = (registry: Registry, evaluator: Evaluator, store: StoreService): void => {
  for (const r of resources(evaluator, store)) registry.put(r)
}
