<?php
// Runs calls of generated PHP packages for the Go tests, and prints what each returned
// or threw as one JSON object on standard output.
//
//   php drive.php PACKAGE_DIR... cases.json
//
// Each package is loaded as Composer would: by the PSR-4 map of its composer.json.
// cases.json is a list of {name, class, key, baseUrl, method, args}: the driver
// constructs new class(key, baseUrl) and calls method(...args).

declare(strict_types=1);

require __DIR__ . '/psr4.php';

foreach (array_slice($argv, 1, -1) as $dir) {
    register_package($dir);
}

function describe(Throwable $e): array
{
    return [
        'class' => (new ReflectionClass($e))->getShortName(),
        'isError' => true,
        'message' => $e->getMessage(),
        'status' => $e->status ?? null,
        'error' => $e->error ?? null,
        'data' => property_exists($e, 'data') ? $e->data : 'missing',
        'param' => $e->param ?? null,
        'httpStatus' => $e->httpStatus ?? null,
        'code' => $e->errorCode ?? null,
        'retryAfter' => isset($e->rateLimit) ? $e->rateLimit->retryAfter : null,
        'index' => $e->index ?? null,
    ];
}

$cases = json_decode(file_get_contents(end($argv)), true, 512, JSON_THROW_ON_ERROR);
$results = [];
foreach ($cases as $c) {
    try {
        $client = new $c['class']($c['key'], $c['baseUrl']);
    } catch (Throwable $e) {
        $results[] = ['name' => $c['name'], 'ok' => false, 'stage' => 'constructor', 'error' => describe($e)];
        continue;
    }
    try {
        $args = $c['args'];
        $r = $client->{$c['method']}(...$args);
        $results[] = ['name' => $c['name'], 'ok' => true, 'response' => [
            'status' => $r->status,
            'error' => $r->error,
            'data' => (object) $r->data,
            'httpStatus' => $r->httpStatus,
            'credits' => $r->credits === null ? null : [
                'cost' => $r->credits->cost, 'remaining' => $r->credits->remaining, 'granted' => $r->credits->granted,
            ],
            'replayed' => $r->replayed ?? null,
        ]];
    } catch (Throwable $e) {
        $results[] = ['name' => $c['name'], 'ok' => false, 'stage' => 'call', 'error' => describe($e)];
    }
}
echo json_encode(['results' => $results, 'unhandled' => 0], JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE);
