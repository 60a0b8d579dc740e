// Lint: typescript-eslint's recommended rules plus the package boundaries of DESIGN §2.
import js from "@eslint/js"
import boundaries from "eslint-plugin-boundaries"
import globals from "globals"
import { fileURLToPath } from "node:url"
import tseslint from "typescript-eslint"

// Paths below are from the repository root, wherever eslint runs from (vitest runs in a package).
const root = fileURLToPath(new URL(".", import.meta.url))

// No package reaches into another package's sources or internals: it imports the sibling's
// public entry points (`@koder/fleet-core`, `@koder/fleet-core/testing`) only.
const crossPackage = {
  group: [
    "@koder/*/src",
    "@koder/*/src/**",
    "@koder/*/internal",
    "@koder/*/internal/**",
    "@koder/*/dist/**",
    "../../*/src/**",
    "../../../*/src/**",
    "../../../../*/src/**",
    // `*` also matches `..`: a test three folders deep reaching its own package's src is fine.
    "!../../src/**",
    "!../../../src/**",
    "!../../../../src/**"
  ],
  message: "Import a sibling package through its public entry point (package.json exports), never its src/ or internal/."
}

// Core is runtime-agnostic: it may run in any JavaScript host and embed in other services.
const coreForbidden = {
  group: ["node:*", "better-sqlite3", "pg", "pg-*", "@effect/platform-node", "@effect/platform-node/**", "undici"],
  message: "packages/core is runtime-agnostic (DESIGN §2): drivers and node:* modules belong in adapter packages."
}

// Core's folders from the bottom up (packages/core/README.md draws them). A folder imports only
// folders of a lower rank, so folder cycles cannot form; folders sharing a rank do not import
// each other (controllers and scheduler are peers). The package barrel (src/index.ts) and
// testing/ sit outside the ranks and may import anything.
const coreLayers = [
  ["model"],
  ["object"],
  ["matching"],
  ["store"],
  ["observability", "coordination", "runtime"],
  ["api"],
  ["client"],
  ["informer"],
  ["network"],
  ["policy"],
  ["admission"],
  ["controllers", "scheduler"],
  ["agent"],
  ["federation"]
]

const coreLayerPolicies = coreLayers.flatMap((rank, i) =>
  rank.map((folder) => ({
    from: { element: { type: `core/${folder}` } },
    disallow: {
      to: {
        element: {
          types: coreLayers.slice(i).flat().filter((f) => f !== folder).map((f) => `core/${f}`)
        }
      }
    },
    message: `core/${folder} may import only folders below it, and {{to.element.type}} is not (core's layer order: packages/core/README.md); move the shared piece down or this code up`
  }))
)

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "**/.turbo/**", "**/coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: "module" },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-namespace": "off",
      "no-restricted-imports": ["error", { patterns: [crossPackage] }]
    }
  },
  {
    files: ["packages/core/src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [crossPackage, coreForbidden] }]
    }
  },
  {
    files: ["packages/core/src/**/*.ts"],
    plugins: { boundaries },
    settings: {
      "boundaries/elements": coreLayers.flat().map((folder) => ({
        type: `core/${folder}`,
        pattern: `packages/core/src/${folder}`,
        partialMatch: false
      })),
      "boundaries/legacy-warnings": false,
      "boundaries/root-path": root,
      // Sources import `./X.js` for `X.ts` (NodeNext); the TypeScript resolver maps them.
      "import/resolver": { typescript: { project: `${root}packages/core/tsconfig.json` } }
    },
    rules: {
      "boundaries/dependencies": ["error", { default: "allow", policies: coreLayerPolicies }]
    }
  },
  {
    // One file, one concept; one function, one step (STYLE.md).
    files: ["packages/*/src/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 800, skipBlankLines: false, skipComments: false }],
      "max-lines-per-function": ["error", { max: 200, skipBlankLines: false, skipComments: false, IIFEs: true }]
    }
  },
  {
    // Tests read arbitrary JSON responses; typing every body would only restate the assertions.
    files: ["packages/*/test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" }
  },
  {
    files: ["**/*.mjs", "**/*.js"],
    languageOptions: { globals: globals.node }
  }
)
