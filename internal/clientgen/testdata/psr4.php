<?php
// Loads a generated PHP package as Composer's autoloader would: by the PSR-4 map of
// its composer.json. The Go tests use it in place of vendor/autoload.php.

declare(strict_types=1);

function register_package(string $dir): void
{
    $composer = json_decode(file_get_contents($dir . '/composer.json'), true, 512, JSON_THROW_ON_ERROR);
    foreach ($composer['autoload']['psr-4'] as $prefix => $path) {
        $base = $dir . '/' . $path;
        spl_autoload_register(static function (string $class) use ($prefix, $base): void {
            if (str_starts_with($class, $prefix)) {
                $file = $base . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
                if (is_file($file)) {
                    require $file;
                }
            }
        });
    }
}
