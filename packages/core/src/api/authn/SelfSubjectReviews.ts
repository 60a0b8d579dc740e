/**
 * `POST /apis/authentication.k8s.io/{v1,v1beta1,v1alpha1}/selfsubjectreviews`: who am I? The
 * answer is the request's user as the rest of the pipeline sees it (the impersonated one when the
 * caller impersonates), for `kubectl auth whoami`. A virtual resource: nothing is stored; every
 * authenticated user may create one (`system:basic-user`).
 */
import { Effect } from "effect"
import * as Authentication from "../../model/Authentication.js"
import { json, type UserInfo } from "../Http.js"
import type { Registry, Resource } from "../Registry.js"
import { createOnly, readBody, virtual } from "../VirtualResource.js"

/** `status.userInfo` of a review: kube's UserInfo, empty uid and extra left out. */
export const userInfo = (user: UserInfo): Record<string, unknown> => ({
  username: user.name,
  ...(user.uid === "" ? {} : { uid: user.uid }),
  groups: [...user.groups],
  ...(user.extra === undefined || Object.keys(user.extra).length === 0 ? {} : { extra: user.extra })
})

const inVersion = (version: (typeof Authentication.SelfSubjectReviewVersions)[number]): Resource => {
  const resource: Resource = {
    ...virtual({
      group: Authentication.Group,
      version,
      kind: "SelfSubjectReview",
      plural: "selfsubjectreviews",
      schema: Authentication.selfSubjectReview(version),
      handle: (request, route) =>
        Effect.gen(function* () {
          yield* createOnly(() => resource, request, route)
          const review = yield* readBody(resource, request)
          return json(201, { ...review, metadata: { creationTimestamp: null }, status: { userInfo: userInfo(request.user) } })
        })
    }),
    verbs: ["create"]
  }
  return resource
}

/** The resource in every version it is served in. */
export const resources: ReadonlyArray<Resource> = Authentication.SelfSubjectReviewVersions.map(inVersion)

/** Serve them from `registry` (unless it serves them already). */
export const install = (registry: Registry): void => {
  for (const r of resources) if (registry.byResource(r.group, r.version, r.plural) === undefined) registry.put(r)
}
