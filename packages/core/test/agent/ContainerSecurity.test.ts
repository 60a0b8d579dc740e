/**
 * The agent's reading of a container's securityContext for the runtime: container fields over
 * the pod's, fsGroup and supplementalGroups as supplementary groups, and the kubelet's refusal of
 * runAsNonRoot with uid 0.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ContainerSecurity from "../../src/agent/ContainerSecurity.js"
import type * as Pod from "../../src/model/Pod.js"

const pod = (podSc: Pod.Pod["spec"]["securityContext"], sc?: Pod.Container["securityContext"]): [Pod.Pod, Pod.Container] => {
  const container: Pod.Container = { name: "app", image: "x", ...(sc === undefined ? {} : { securityContext: sc }) }
  const p: Pod.Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "shop", uid: "u1" },
    spec: { containers: [container], ...(podSc === undefined ? {} : { securityContext: podSc }) }
  }
  return [p, container]
}

describe("ContainerSecurity.resolve", () => {
  it("sends an empty security for a pod that says nothing: the runtime's allocated uid, no capabilities", () => {
    expect(ContainerSecurity.resolve(...pod(undefined))).toEqual(Either.right({ security: {} }))
  })

  it("takes the container's fields over the pod's and adds fsGroup to the supplementary groups", () => {
    const r = ContainerSecurity.resolve(
      ...pod(
        { runAsUser: 1000, runAsGroup: 2000, runAsNonRoot: true, fsGroup: 3000, supplementalGroups: [4000] },
        { runAsUser: 1001, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { add: ["NET_BIND_SERVICE"], drop: ["ALL"] } }
      )
    )
    expect(r).toEqual(
      Either.right({
        user: { uid: 1001, gid: 2000, supplementalGroups: [4000, 3000] },
        security: {
          runAsNonRoot: true,
          capabilities: { add: ["NET_BIND_SERVICE"], drop: ["ALL"] },
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true
        }
      })
    )
  })

  it("without runAsUser, passes the group and groups in security for the allocated uid", () => {
    expect(ContainerSecurity.resolve(...pod({ runAsGroup: 5, fsGroup: 6 }, { privileged: true }))).toEqual(
      Either.right({ security: { privileged: true, runAsGroup: 5, supplementalGroups: [6] } })
    )
  })

  it("refuses runAsNonRoot with runAsUser 0 as the kubelet does", () => {
    const r = ContainerSecurity.resolve(...pod({ runAsNonRoot: true }, { runAsUser: 0 }))
    expect(Either.isLeft(r) && r.left).toBe('container has runAsNonRoot and image will run as root (pod: "web_shop(u1)", container: app)')
  })
})
