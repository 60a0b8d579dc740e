import { ContinueToken } from "@koder/fleet-core"
import { Either } from "effect"
import { describe, expect, it } from "vitest"

describe("ContinueToken", () => {
  it.each([
    { revision: 0, after: "" },
    { revision: 42, after: "/registry/pods/default/web-0" },
    { revision: 9_007_199_254_740_991, after: "ключ/😀/\u0000" }
  ])("round-trips %j through a URL-safe string", (token) => {
    const text = ContinueToken.encode(token)
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(ContinueToken.decode(text)).toEqual(Either.right(token))
  })

  it.each(["", "!!!", "bm90IGpzb24", btoa(JSON.stringify({ v: 2, rv: 1, k: "a" })), btoa(JSON.stringify({ v: 1, rv: -1, k: "a" })), btoa(JSON.stringify({ v: 1, rv: 1.5, k: "a" }))])(
    "rejects %j with Expired",
    (text) => {
      const decoded = ContinueToken.decode(text)
      expect(Either.isLeft(decoded) && decoded.left._tag).toBe("Expired")
    }
  )

  it("explains an expired token in words a client can act on", () => {
    expect(ContinueToken.expired(10, 20).message).toContain("restart the list without a continue token")
  })
})
