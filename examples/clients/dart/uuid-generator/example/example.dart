import 'dart:io';

import 'package:tollgate_uuid_generator/tollgate_uuid_generator.dart';

Future<void> main() async {
  final client = UuidGeneratorClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.execute(UuidGeneratorParams());
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
