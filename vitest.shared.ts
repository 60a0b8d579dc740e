// Shared Vitest settings: every package resolves its workspace siblings to their TypeScript
// sources (the `@koder/source` export condition), so tests never need a build first.
import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

const conditions = ["@koder/source", ...defaultServerConditions]

export const shared = defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: process.env.CI ? ["default"] : ["default"]
  }
})
