import 'dart:io';

import 'package:tollgate_hash/tollgate_hash.dart';

Future<void> main() async {
  final client = HashClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.execute(HashParams(text: 'hello'));
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
