# One image for every Baton process; the command picks the role
# (`serve`, `api`, `worker`, `demo-host`, `db migrate`). See docker-compose.yml.
FROM node:20-bookworm-slim

WORKDIR /app
ENV NODE_ENV=production \
    CHECKPOINT_DISABLE=1 \
    PRISMA_HIDE_UPDATE_MESSAGE=1

# Dependencies first, so this layer is rebuilt only when the lockfile or the schema changes.
# package.json's `allowScripts` denies the dependencies' own install scripts (Prisma's engine
# download, esbuild, msgpackr-extract); the npm in this image (10.x) ignores that field, so
# `--ignore-scripts` applies the same policy here. That also skips Baton's own `postinstall`,
# so the Prisma client is generated explicitly, by the same script (needs prisma/schema.prisma).
# The one allowed dependency script (@embedded-postgres) is only for `baton demo`, which this
# image does not serve: it gets Postgres and Redis from docker-compose.yml.
COPY package.json package-lock.json ./
COPY scripts/prisma-generate.mjs scripts/
COPY prisma/schema.prisma prisma/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm run prisma:generate \
 && npm cache clean --force

# The source runs as TypeScript through tsx (bin/baton.mjs): there is no build step.
COPY . .

USER node
EXPOSE 8787
CMD ["node", "bin/baton.mjs", "serve"]
