import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as DefaultServiceAccount from "../../src/admission/DefaultServiceAccount.js"

const pod = (spec: Record<string, unknown> = {}, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "a", annotations },
  spec: { containers: [{ name: "app", image: "x" }], ...spec }
})
const present = (automount?: boolean) => ({ _tag: "Present", automount }) as const

describe("DefaultServiceAccount.decide", () => {
  const mounted = (o: any) => (o.spec.volumes ?? []).some((v: any) => v.name === "kube-api-access-abcde")
  const cases: ReadonlyArray<[string, object, DefaultServiceAccount.Account | undefined, DefaultServiceAccount.Options, string, boolean]> = [
    ["unset → default", pod(), undefined, {}, "default", false],
    ["named account kept", pod({ serviceAccountName: "builder" }), undefined, {}, "builder", false],
    ["token volume by default", pod(), present(), { tokenVolume: true }, "default", true],
    ["pod opts out", pod({ automountServiceAccountToken: false }), present(true), { tokenVolume: true }, "default", false],
    ["account opts out", pod(), present(false), { tokenVolume: true }, "default", false],
    ["pod overrides the account", pod({ automountServiceAccountToken: true }), present(false), { tokenVolume: true }, "default", true]
  ]
  it.each(cases)("%s", (_what, input, account, options, name, volume) => {
    const out = Either.getOrThrow(DefaultServiceAccount.decide(input as never, account, options, "abcde")) as any
    expect(out.spec.serviceAccountName).toBe(name)
    expect(mounted(out)).toBe(volume)
    if (volume) expect(out.spec.containers[0].volumeMounts).toEqual([{ name: "kube-api-access-abcde", readOnly: true, mountPath: DefaultServiceAccount.mountPath }])
  })

  it("leaves mirror pods alone and refuses a missing account when asked to", () => {
    const mirror = pod({}, { [DefaultServiceAccount.mirrorAnnotation]: "x" })
    expect(Either.getOrThrow(DefaultServiceAccount.decide(mirror as never, undefined, {}, "abcde"))).toBe(mirror)
    expect(DefaultServiceAccount.decide(pod() as never, { _tag: "Missing" }, { requireServiceAccount: true }, "abcde")).toEqual(
      Either.left('error looking up service account a/default: serviceaccount "default" not found')
    )
  })
})
