# One image for every Baton process; the command picks the role
# (`serve`, `api`, `worker`, `demo-host`, `db migrate`). See docker-compose.yml.
# The Node major here must match package.json's `engines.node` (test/unit/docker-compose.test.ts).
# Build stage: every dependency (TypeScript included), the Prisma client generated, and the
# sources compiled to dist/ (scripts/build.mjs, the same build `npm install` runs).
FROM node:20-bookworm-slim AS build
WORKDIR /app
ENV CHECKPOINT_DISABLE=1 \
    PRISMA_HIDE_UPDATE_MESSAGE=1
# package.json's `allowScripts` denies the dependencies' own install scripts (Prisma's engine
# download, esbuild, msgpackr-extract); the npm in this image (10.x) ignores that field, so
# `--ignore-scripts` applies the same policy here. That also skips Baton's own `postinstall`,
# so its two steps run explicitly below, once the sources are in.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run prisma:generate && npm run build

# Run stage: production dependencies and the compiled build only; no TypeScript at run time.
# The one allowed dependency script (@embedded-postgres) is only for `baton demo`, which this
# image does not serve: it gets Postgres and Redis from docker-compose.yml.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    CHECKPOINT_DISABLE=1 \
    PRISMA_HIDE_UPDATE_MESSAGE=1
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
# dist/ holds the compiled code with what it reads at run time (migrations, lock scripts, the
# command supervisor, the compiled Prisma client); bin/baton.mjs loads it.
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The admin token and CLI profile the API writes on first start (BATON_HOME): a volume in
# docker-compose.yml, so a new container keeps the token.
RUN mkdir -p /home/node/.baton && chown node:node /home/node/.baton

USER node
EXPOSE 8787
CMD ["node", "bin/baton.mjs", "serve"]
