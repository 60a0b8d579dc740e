import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as RegionLabel from "../../src/admission/RegionLabel.js"

const label = "fleet.koder.dev/region"
const withRegion = (region?: string) => ({ metadata: { name: "x", ...(region === undefined ? {} : { labels: { [label]: region } }) } })

describe("RegionLabel.decide", () => {
  const cases: ReadonlyArray<[string, "CREATE" | "UPDATE" | "DELETE", object, object | undefined, string | undefined | "refused"]> = [
    ["create without a label", "CREATE", withRegion(), undefined, "eu-1"],
    ["create replicated from elsewhere", "CREATE", withRegion("us-2"), undefined, "us-2"],
    ["update that dropped the label", "UPDATE", withRegion(), withRegion("us-2"), "us-2"],
    ["update that keeps it", "UPDATE", withRegion("us-2"), withRegion("us-2"), "us-2"],
    ["update that changes it", "UPDATE", withRegion("eu-1"), withRegion("us-2"), "refused"],
    ["update of an unlabelled object", "UPDATE", withRegion(), withRegion(), "eu-1"],
    ["delete", "DELETE", withRegion(), withRegion(), undefined]
  ]
  it.each(cases)("%s", (_what, operation, object, oldObject, want) => {
    const decided = RegionLabel.decide({ operation, object: object as never, oldObject: oldObject as never }, "eu-1")
    if (want === "refused") expect(Either.isLeft(decided) && decided.left.message).toBe('Invalid value: "eu-1": field is immutable')
    else expect((Either.getOrThrow(decided)["metadata"] as any).labels?.[label]).toBe(want)
  })
})
